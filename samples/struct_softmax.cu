// Scaled softmax over rows of attention scores whose sizes arrive in a parameter struct passed by value, as
// inference runtimes pass their many shapes and flags to one kernel: one block per row, loops over the row stepping
// by the block, a warp-shuffle then shared-memory reduction for the row's maximum and sum, the row kept in the
// output between the passes. The row length is a struct member, so it cannot be compiled in as a size.
#include <cstdint>
#include <cuda_runtime.h>

namespace attn {

constexpr int kWarp = 32;

struct SoftmaxParams {
  int rows;
  int cols;
  float scale;
  float pad;
};

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void struct_softmax_kernel(const float* __restrict__ x, float* __restrict__ y, const SoftmaxParams p) {
  __shared__ float partial[kWarp];
  const int cols = p.cols;
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  x += static_cast<int64_t>(blockIdx.x) * cols;
  y += static_cast<int64_t>(blockIdx.x) * cols;

  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = x[c] * p.scale;
    y[c] = v;
    m = fmaxf(m, v);
  }
  m = warp_max(m);
  if (blockDim.x > kWarp) {
    if (warp == 0) {
      partial[lane] = -INFINITY;
    }
    __syncthreads();
    if (lane == 0) {
      partial[warp] = m;
    }
    __syncthreads();
    m = partial[lane];
    m = warp_max(m);
  }

  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float e = __expf(y[c] - m);
    y[c] = e;
    s += e;
  }
  s = warp_sum(s);
  if (blockDim.x > kWarp) {
    __syncthreads();
    if (warp == 0) {
      partial[lane] = 0.0f;
    }
    __syncthreads();
    if (lane == 0) {
      partial[warp] = s;
    }
    __syncthreads();
    s = partial[lane];
    s = warp_sum(s);
  }

  const float inv = 1.0f / s;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    y[c] *= inv;
  }
}

}  // namespace attn

// Whole warps, doubled up to the row's length.
void struct_softmax(const float* x, float* y, int rows, int cols, float scale, cudaStream_t stream) {
  int threads = attn::kWarp;
  while (threads < cols && threads < 1024) threads *= 2;
  const attn::SoftmaxParams p{rows, cols, scale, 0.0f};
  attn::struct_softmax_kernel<<<rows, threads, 0, stream>>>(x, y, p);
}
