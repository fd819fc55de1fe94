// A grid-stride loop: any grid covers the data, so only the launch's grid changes with items per thread.
#include <cstddef>

__global__ void axpy_kernel(size_t n, float a, const float* x, float* y) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    y[i] = a * x[i] + y[i];
  }
}

void axpy(size_t n, float a, const float* x, float* y) {
  const int threads = 512;
  const int blocks = static_cast<int>((n + threads - 1) / threads);
  axpy_kernel<<<blocks, threads>>>(n, a, x, y);
}
