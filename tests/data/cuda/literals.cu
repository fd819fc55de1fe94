// One of each tunable literal kind, and how each is tied to a kernel.
#include <algorithm>
#include <cuda_runtime.h>

#define BLOCK_SIZE 256  // threads of `scale`, used only there
#define SHARED_ITEMS 4  // used by two kernels: belongs to neither
#define SCALE(x) ((x) * 2)

constexpr int kItems = 8;  // file scope, used by `other` only

namespace tune {
constexpr unsigned int kNsItems = 2;  // namespace scope, used by nobody
}

template <typename T, int VEC>
__global__ void __launch_bounds__(BLOCK_SIZE, 2) scale(T* x, int n) {
  constexpr int kInner = 3;
  constexpr int kVec = 16 / sizeof(T);
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll 4
  for (int j = 0; j < kInner * kVec * VEC; ++j) {
    if (i < n) x[i] = SCALE(x[i]);
  }
}

__global__ void other(float* x, int n) {
  for (int j = 0; j < kItems * SHARED_ITEMS; ++j) x[j] += 1.0f;
}

__global__ void third(float* x, int n) {
  x[SHARED_ITEMS] = n;
}

void launch(float* x, int n, cudaStream_t stream) {
  constexpr int kThreads = 128;
  dim3 block(std::min(n, 1024));
  dim3 grid((n + 255) / 256);
  scale<float, 4><<<grid, block, 0, stream>>>(x, n);
  other<<<n / kThreads, kThreads>>>(x, n);
  third<<<1, 64>>>(x, n);
}
