// Single-pass-statistics softmax over rows of fp32 logits (a decode step's sampling head): one block of kThreads
// threads per row, each thread taking 4 consecutive logits a round (the vocabulary a multiple of 4), counted over the
// block's rounds. The row's maximum and its sum of exponentials are kept online: each round's maximum is reduced over
// the block and every thread rescales its running sum to it, so the row is read once for the statistics and once to
// normalise. A round whose block maximum is infinite (all -inf: masked logits) leaves the statistics as they were.
#include <cuda_runtime.h>
#include <math_constants.h>

#include <cub/block/block_reduce.cuh>
#include <cstddef>

namespace decode {

// CCCL in CUDA 13 has no cub::Max: a project carries its own functor.
struct MaxOp {
  __device__ __forceinline__ float operator()(const float a, const float b) const { return fmaxf(a, b); }
};

template <int kThreads>
__global__ void online_softmax_kernel(float* __restrict__ probs, const float* __restrict__ logits, const int vocab) {
  using BlockReduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_store;
  __shared__ float s_round_max;
  __shared__ float s_total;
  const float* x = logits + static_cast<size_t>(blockIdx.x) * vocab;
  float* y = probs + static_cast<size_t>(blockIdx.x) * vocab;
  const int rounds = (vocab + 4 * kThreads - 1) / (4 * kThreads);

  float row_max = -CUDART_INF_F;
  float partial = 0.f;  // this thread's sum of exp(logit - row_max)
  for (int r = 0; r < rounds; ++r) {
    const int at = (r * kThreads + threadIdx.x) * 4;
    float4 v = make_float4(-CUDART_INF_F, -CUDART_INF_F, -CUDART_INF_F, -CUDART_INF_F);
    if (at < vocab) v = *reinterpret_cast<const float4*>(x + at);
    const float lanes[4] = {v.x, v.y, v.z, v.w};
    float local_max = -CUDART_INF_F;
#pragma unroll
    for (int k = 0; k < 4; ++k) local_max = fmaxf(local_max, lanes[k]);

    float round_max = BlockReduce(reduce_store).Reduce(local_max, MaxOp{});
    if (threadIdx.x == 0) s_round_max = round_max;
    __syncthreads();
    round_max = s_round_max;

    if (!isinf(round_max)) {
      float round_sum = 0.f;
#pragma unroll
      for (int k = 0; k < 4; ++k) round_sum += __expf(lanes[k] - round_max);
      const float new_max = fmaxf(row_max, round_max);
      partial = partial * __expf(row_max - new_max) + round_sum * __expf(round_max - new_max);
      row_max = new_max;
    }
  }

  const float total = BlockReduce(reduce_store).Sum(partial);
  if (threadIdx.x == 0) s_total = total;
  __syncthreads();
  const float inv_total = 1.f / s_total;

  for (int r = 0; r < rounds; ++r) {
    const int at = (r * kThreads + threadIdx.x) * 4;
    if (at < vocab) {
      const float4 v = *reinterpret_cast<const float4*>(x + at);
      *reinterpret_cast<float4*>(y + at) =
          make_float4(__expf(v.x - row_max) * inv_total, __expf(v.y - row_max) * inv_total,
                      __expf(v.z - row_max) * inv_total, __expf(v.w - row_max) * inv_total);
    }
  }
}

}  // namespace decode

void online_softmax(float* probs, const float* logits, int rows, int vocab, cudaStream_t stream) {
  constexpr int kThreads = 256;
  decode::online_softmax_kernel<kThreads><<<rows, kThreads, 0, stream>>>(probs, logits, vocab);
}
