// A small elementwise kernel for the language server's tests.
#include <cuda_runtime.h>

// cutune: tunable parameters of scale_kernel (defaults are the original choices; `cutune tune` searches them)
struct scale_kernel_tuning {
  static constexpr int BLOCK_THREADS = 128;   // threads per block
  static constexpr int ITEMS_PER_THREAD = 1;  // consecutive block-chunks each thread handles (the grid shrinks by as much)
};

template <int ITEMS_PER_THREAD = scale_kernel_tuning::ITEMS_PER_THREAD>
__global__ void scale_kernel(float* __restrict__ out, const float* __restrict__ in, float a, int n) {
  for (int item = 0; item < ITEMS_PER_THREAD; ++item) {
    const int i = (blockIdx.x * ITEMS_PER_THREAD + item) * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * in[i];
  }
}

__global__ void add_kernel(float* __restrict__ out, const float* __restrict__ x, const float* __restrict__ y, int n) {
#pragma unroll 4
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = x[i] + y[i];
  }
}

void scale(float* out, const float* in, float a, int n, cudaStream_t stream) {
  scale_kernel<<<(((n + (scale_kernel_tuning::BLOCK_THREADS - 1)) / scale_kernel_tuning::BLOCK_THREADS) + scale_kernel_tuning::ITEMS_PER_THREAD - 1) / scale_kernel_tuning::ITEMS_PER_THREAD, scale_kernel_tuning::BLOCK_THREADS, 0, stream>>>(out, in, a, n);
}

void add(float* out, const float* x, const float* y, int n, cudaStream_t stream) {
  add_kernel<<<1024, 256, 0, stream>>>(out, x, y, n);
}
