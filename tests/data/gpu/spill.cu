// 64 live accumulators under -maxrregcount=32 force ptxas to spill registers to local memory.
__global__ void spill_kernel(const float* __restrict__ in, float* __restrict__ out, int n) {
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
