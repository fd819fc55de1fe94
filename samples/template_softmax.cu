// Softmax over attention scores, one block per (token, head) row, in the shape of a kernel instantiated for the
// lengths the host knows: the row length and the block size are template constants where known (0: read at run
// time), the row staged after a slot per warp in dynamic shared memory (or in the output itself), the rounds over
// the row counted by their offset with an exit past its end, and a per-head sink added to the sum.
#include <cstdint>
#include <cuda_runtime.h>

namespace tsm {

constexpr int kWarp = 32;

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

template <bool kStaged, int kCols, int kBlock>
__global__ void template_softmax_kernel(const float* __restrict__ x, const float* __restrict__ sinks,
                                        float* __restrict__ y, const int cols_rt, const float scale) {
  const int cols = kCols == 0 ? cols_rt : kCols;
  const int block = kBlock == 0 ? blockDim.x : kBlock;
  const int tid = threadIdx.x;
  const int lane = tid % kWarp;
  const int warp = tid / kWarp;
  const int head = blockIdx.y;
  const int row = blockIdx.x + blockIdx.y * gridDim.x;

  extern __shared__ float smem[];
  float* partial = smem;  // a slot per warp
  float* cache = kStaged ? smem + kWarp : y + static_cast<int64_t>(row) * cols;
  x += static_cast<int64_t>(row) * cols;
  y += static_cast<int64_t>(row) * cols;

  float m = sinks ? sinks[head] : -INFINITY;
  for (int c0 = 0; c0 < cols; c0 += block) {
    const int c = c0 + tid;
    if (kCols == 0 && c >= cols) {
      break;
    }
    const float v = x[c] * scale;
    cache[c] = v;
    m = fmaxf(m, v);
  }
  m = warp_max(m);
  if (block > kWarp) {
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
  for (int c0 = 0; c0 < cols; c0 += block) {
    const int c = c0 + tid;
    if (kCols == 0 && c >= cols) {
      break;
    }
    const float e = __expf(cache[c] - m);
    cache[c] = e;
    s += e;
  }
  s = warp_sum(s);
  if (block > kWarp) {
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
  if (sinks) {
    s += __expf(sinks[head] - m);
  }

  const float inv = 1.0f / s;
  for (int c0 = 0; c0 < cols; c0 += block) {
    const int c = c0 + tid;
    if (kCols == 0 && c >= cols) {
      return;
    }
    y[c] = cache[c] * inv;
  }
}

}  // namespace tsm

// Whole warps, doubled up to the row's length; the row's floats after the warps' slots.
void template_softmax(const float* x, const float* sinks, float* y, int tokens, int heads, int cols, float scale,
                      cudaStream_t stream) {
  int threads = tsm::kWarp;
  while (threads < cols && threads < 1024) threads *= 2;
  const size_t bytes = (static_cast<size_t>(cols) + tsm::kWarp) * sizeof(float);
  tsm::template_softmax_kernel<true, 0, 0><<<dim3(tokens, heads), threads, bytes, stream>>>(x, sinks, y, cols, scale);
}
