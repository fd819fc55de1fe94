// A small elementwise kernel for the language server's tests.
#include <cuda_runtime.h>

__global__ void scale_kernel(float* __restrict__ out, const float* __restrict__ in, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * in[i];
}

__global__ void add_kernel(float* __restrict__ out, const float* __restrict__ x, const float* __restrict__ y, int n) {
#pragma unroll 4
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = x[i] + y[i];
  }
}

void scale(float* out, const float* in, float a, int n, cudaStream_t stream) {
  scale_kernel<<<(n + 127) / 128, 128, 0, stream>>>(out, in, a, n);
}

void add(float* out, const float* x, const float* y, int n, cudaStream_t stream) {
  add_kernel<<<1024, 256, 0, stream>>>(out, x, y, n);
}
