// 64 live accumulators per thread: fine with the compiler's own register choice, spilled under
// -maxrregcount=32. Launched with a literal block size, so block_threads and compile_flags apply.
__global__ void accumulate_kernel(const float* __restrict__ in, float* __restrict__ out, int n) {
  float acc[64];
  int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 64; ++k) acc[k] = in[t + k * n];
  for (int j = 0; j < n; ++j) {
#pragma unroll
    for (int k = 0; k < 64; ++k) acc[k] = acc[k] * acc[(k + 1) & 63] + in[j * 64 + k];
  }
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 64; ++k) s += acc[k] * (k + 1);
  out[t] = s;
}

void accumulate(const float* in, float* out, int n, int blocks) {
  accumulate_kernel<<<blocks, 256>>>(in, out, n);
}
