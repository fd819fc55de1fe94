// Temperature softmax over the vocabulary before sampling, as serving stacks' sampling headers write it: one block
// of a compile-time kBlockThreads per row, loops stepping by that count, cub::BlockReduce for the row's maximum and
// sum (CUB runs it only on a block of exactly kBlockThreads threads), and a launch through cudaLaunchKernelEx with
// programmatic dependent launch rather than <<<>>>.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <cub/block/block_reduce.cuh>

namespace sampling {

// CCCL in CUDA 13 has no cub::Max; production code carries its own functor.
struct MaxOp {
  __device__ __forceinline__ float operator()(const float a, const float b) const { return fmaxf(a, b); }
};

template <int kBlockThreads>
__global__ void block_softmax_kernel(float* __restrict__ probs,         // [rows, vocab]
                                     const float* __restrict__ logits,  // [rows, vocab]
                                     const int vocab, const float inv_temperature) {
  using BlockReduce = cub::BlockReduce<float, kBlockThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_store;
  __shared__ float s_max;
  __shared__ float s_sum;
  const int64_t row = blockIdx.x;

  float thread_max = -FLT_MAX;
  for (int i = threadIdx.x; i < vocab; i += kBlockThreads) {
    thread_max = fmaxf(thread_max, logits[row * vocab + i] * inv_temperature);
  }
  const float block_max = BlockReduce(reduce_store).Reduce(thread_max, MaxOp{});
  if (threadIdx.x == 0) {
    s_max = block_max;
  }
  __syncthreads();

  float thread_sum = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += kBlockThreads) {
    thread_sum += __expf(logits[row * vocab + i] * inv_temperature - s_max);
  }
  const float block_sum = BlockReduce(reduce_store).Sum(thread_sum);
  if (threadIdx.x == 0) {
    s_sum = block_sum;
  }
  __syncthreads();

  const float inv_sum = 1.0f / s_sum;
  for (int i = threadIdx.x; i < vocab; i += kBlockThreads) {
    probs[row * vocab + i] = __expf(logits[row * vocab + i] * inv_temperature - s_max) * inv_sum;
  }
}

}  // namespace sampling

cudaError_t block_softmax(float* probs, const float* logits, int rows, int vocab, float temperature, bool enable_pdl,
                          cudaStream_t stream) {
  constexpr int kBlockThreads = 512;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = enable_pdl ? 1 : 0;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(rows);
  config.blockDim = dim3(kBlockThreads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, sampling::block_softmax_kernel<kBlockThreads>, probs, logits, vocab,
                            1.0f / temperature);
}
