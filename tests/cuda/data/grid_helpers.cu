// Grid-stride kernels whose grid the host computes: a capped local, a capped ceil_div, and a helper function,
// as serving code writes them; and two the recipe refuses (a helper it cannot read, a kernel that does not
// stride over its grid).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace serving {

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

static int num_blocks(int n) { return std::min((n + 255) / 256, 1024); }

static int pick_blocks(int n, int sms) {
  int blocks = n / 256;
  if (blocks > 4 * sms) blocks = 4 * sms;
  return blocks;
}

// one block per token, the tokens strided over a grid of at most 256 blocks
template <typename T>
__global__ void scale_tokens_kernel(T* __restrict__ out, const T* __restrict__ in, const int num_tokens,
                                    const int d) {
  for (int t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
      const int64_t at = static_cast<int64_t>(t) * d + i;
      out[at] = static_cast<T>(2.f * static_cast<float>(in[at]));
    }
  }
}

void scale_tokens(float* out, const float* in, int num_tokens, int d, cudaStream_t stream) {
  const int blocks = std::min(num_tokens, 256);
  scale_tokens_kernel<float><<<blocks, 128, 0, stream>>>(out, in, num_tokens, d);
}

__global__ void axpy_kernel(float* __restrict__ y, const float* __restrict__ x, const float a, const int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    y[i] += a * x[i];
  }
}

void axpy(float* y, const float* x, float a, int n, cudaStream_t stream) {
  const int grid = std::min(ceil_div(n, 256), 2048);
  axpy_kernel<<<grid, 256, 0, stream>>>(y, x, a, n);
}

__global__ void relu_kernel(float* __restrict__ y, const float* __restrict__ x, const int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    y[i] = fmaxf(x[i], 0.f);
  }
}

void relu(float* y, const float* x, int n, cudaStream_t stream) {
  relu_kernel<<<num_blocks(n), 256, 0, stream>>>(y, x, n);
}

__global__ void clamp_kernel(float* __restrict__ y, const int n, const float lo, const float hi) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    y[i] = fminf(fmaxf(y[i], lo), hi);
  }
}

void clamp(float* y, int n, float lo, float hi, int sms, cudaStream_t stream) {
  clamp_kernel<<<pick_blocks(n, sms), 256, 0, stream>>>(y, n, lo, hi);
}

__global__ void fill_kernel(float* __restrict__ y, const int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 0.f;
}

void fill(float* y, int n, cudaStream_t stream) {
  fill_kernel<<<std::min(ceil_div(n, 256), 65535), 256, 0, stream>>>(y, n);
}

}  // namespace serving
