// Softmax over rows of fp32 logits, one block per row, in the style of kernels that vectorise by hand with float4:
// each thread takes 4 consecutive logits a round, counted over the block's rounds with the bounds check inside the
// loop (the row's length is a multiple of 4); the row's maximum and its sum of exponentials go through warp shuffles
// and shared memory, and the row is read again for each pass.
#include <cuda_runtime.h>
#include <math_constants.h>

#include <algorithm>

namespace serving {

__global__ void rounds_softmax_kernel(float* __restrict__ out, const float* __restrict__ logits, const int cols) {
  const int row = blockIdx.x;
  const int tid = threadIdx.x;
  const int threads = blockDim.x;
  const int rounds = (cols + 4 * threads - 1) / (4 * threads);
  __shared__ float partial[32];
  const float* x = logits + static_cast<size_t>(row) * cols;
  float* y = out + static_cast<size_t>(row) * cols;

  float row_max = -CUDART_INF_F;
  for (int r = 0; r < rounds; ++r) {
    float4 v = make_float4(-CUDART_INF_F, -CUDART_INF_F, -CUDART_INF_F, -CUDART_INF_F);
    const int at = (r * threads + tid) * 4;
    if (at < cols) v = *reinterpret_cast<const float4*>(x + at);
    row_max = fmaxf(row_max, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
  }
  for (int o = 16; o > 0; o >>= 1) row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, o));
  if (tid % 32 == 0) partial[tid / 32] = row_max;
  __syncthreads();
  if (tid < 32) {
    row_max = tid < threads / 32 ? partial[tid] : -CUDART_INF_F;
    for (int o = 16; o > 0; o >>= 1) row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, o));
    if (tid == 0) partial[0] = row_max;
  }
  __syncthreads();
  const float m = partial[0];
  __syncthreads();  // partial is reused for the sum

  float total = 0.f;
  for (int r = 0; r < rounds; ++r) {
    float4 e = make_float4(0.f, 0.f, 0.f, 0.f);
    const int at = (r * threads + tid) * 4;
    if (at < cols) {
      const float4 v = *reinterpret_cast<const float4*>(x + at);
      e = make_float4(__expf(v.x - m), __expf(v.y - m), __expf(v.z - m), __expf(v.w - m));
    }
    total += (e.x + e.y) + (e.z + e.w);
  }
  for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
  if (tid % 32 == 0) partial[tid / 32] = total;
  __syncthreads();
  if (tid < 32) {
    total = tid < threads / 32 ? partial[tid] : 0.f;
    for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
    if (tid == 0) partial[0] = total;
  }
  __syncthreads();
  const float inv = 1.f / partial[0];

  for (int r = 0; r < rounds; ++r) {
    const int at = (r * threads + tid) * 4;
    if (at < cols) {
      const float4 v = *reinterpret_cast<const float4*>(x + at);
      *reinterpret_cast<float4*>(y + at) =
          make_float4(__expf(v.x - m) * inv, __expf(v.y - m) * inv, __expf(v.z - m) * inv, __expf(v.w - m) * inv);
    }
  }
}

}  // namespace serving

void rounds_softmax(float* out, const float* logits, int rows, int cols, cudaStream_t stream) {
  const int threads = std::min(1024, std::max(32, (cols / 4 + 31) / 32 * 32));
  serving::rounds_softmax_kernel<<<rows, threads, 0, stream>>>(out, logits, cols);
}
