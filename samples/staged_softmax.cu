// Softmax over short rows (attention scores over a short context, router logits): one block per row, the row's
// scaled logits staged once in dynamic shared memory (the launch sizes it to the row), the maximum and the sum
// reduced over the block through warp shuffles and a shared array of the warps' partials.
#include <cstdint>
#include <cuda_runtime.h>

namespace staged {

constexpr int kWarp = 32;

__global__ void staged_softmax_kernel(const float* __restrict__ logits, float* __restrict__ probs, const int cols,
                                      const float scale) {
  extern __shared__ float row_buf[];
  __shared__ float partial[kWarp];  // a partial per warp, up to 1024 threads

  const int tid = threadIdx.x;
  const int lane = tid % kWarp;
  const int warp = tid / kWarp;
  const float* in = logits + static_cast<int64_t>(blockIdx.x) * cols;
  float* out = probs + static_cast<int64_t>(blockIdx.x) * cols;

  float m = -INFINITY;
  for (int c = tid; c < cols; c += blockDim.x) {
    const float v = in[c] * scale;
    row_buf[c] = v;
    m = fmaxf(m, v);
  }
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) partial[warp] = m;
  __syncthreads();
  m = partial[0];
#pragma unroll
  for (int w = 1; w < blockDim.x / kWarp; ++w) m = fmaxf(m, partial[w]);
  __syncthreads();

  float s = 0.f;
  for (int c = tid; c < cols; c += blockDim.x) {
    const float e = __expf(row_buf[c] - m);
    row_buf[c] = e;
    s += e;
  }
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) partial[warp] = s;
  __syncthreads();
  s = 0.f;
#pragma unroll
  for (int w = 0; w < blockDim.x / kWarp; ++w) s += partial[w];

  const float inv = 1.f / s;
  for (int c = tid; c < cols; c += blockDim.x) out[c] = row_buf[c] * inv;
}

}  // namespace staged

void staged_softmax(const float* logits, float* probs, int rows, int cols, float scale, cudaStream_t stream) {
  staged::staged_softmax_kernel<<<rows, 128, cols * sizeof(float), stream>>>(logits, probs, cols, scale);
}
