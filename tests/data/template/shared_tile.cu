// A block sum with a shared array sized for exactly 256 threads and indexed by threadIdx.
__global__ void block_sum_kernel(const float* in, float* out, int n) {
  __shared__ float tile[256];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? in[i] : 0.f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) tile[threadIdx.x] += tile[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = tile[0];
}

void block_sum(const float* in, float* out, int n) {
  block_sum_kernel<<<(n + 255) / 256, 256>>>(in, out, n);
}
