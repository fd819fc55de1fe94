// Split-vocabulary softmax statistics (the map phase of a two-phase softmax over large vocabularies, as sampling
// libraries write it): blockIdx.y picks a slice of the row, the slice width rounded up to whole 16-byte packs
// (`round_up(ceil_div(vocab, num_slices), 16 / sizeof(T))`), and the blocks whose slice starts past the row's end
// leave at once; each block writes its slice's maximum and the sum of exp(x - max), reduced by a
// cub::BlockReduce over the kBlockThreads threads its loops step by.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <cub/block/block_reduce.cuh>

namespace sampling {

// CCCL in CUDA 13 has no cub::Max; production code carries its own functor.
struct MaxOp {
  __device__ __forceinline__ float operator()(const float a, const float b) const { return fmaxf(a, b); }
};

__host__ __device__ __forceinline__ uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }
__host__ __device__ __forceinline__ uint32_t round_up(uint32_t a, uint32_t b) { return ceil_div(a, b) * b; }

template <typename T, int kBlockThreads>
__global__ void slice_softmax_stats_kernel(float* __restrict__ slice_max_out,  // [rows, num_slices]
                                           float* __restrict__ slice_sum_out,  // [rows, num_slices]
                                           const T* __restrict__ logits,       // [rows, vocab]
                                           const uint32_t vocab, const uint32_t num_slices) {
  using BlockReduce = cub::BlockReduce<float, kBlockThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_store;
  __shared__ float s_max;
  const uint32_t row = blockIdx.x;
  const uint32_t slice = blockIdx.y;
  const uint32_t pack_elems = 16 / sizeof(T);
  const uint32_t slice_stride = round_up(ceil_div(vocab, num_slices), pack_elems);
  const uint32_t slice_start = slice * slice_stride;
  if (slice_start >= vocab) return;
  const uint32_t slice_size = min(slice_stride, vocab - slice_start);
  const uint64_t base = static_cast<uint64_t>(row) * vocab + slice_start;

  float thread_max = -FLT_MAX;
  for (uint32_t i = threadIdx.x; i < slice_size; i += kBlockThreads) {
    thread_max = fmaxf(thread_max, static_cast<float>(logits[base + i]));
  }
  const float block_max = BlockReduce(reduce_store).Reduce(thread_max, MaxOp{});
  if (threadIdx.x == 0) {
    s_max = block_max;
  }
  __syncthreads();

  float thread_sum = 0.0f;
  for (uint32_t i = threadIdx.x; i < slice_size; i += kBlockThreads) {
    thread_sum += __expf(static_cast<float>(logits[base + i]) - s_max);
  }
  const float block_sum = BlockReduce(reduce_store).Sum(thread_sum);
  if (threadIdx.x == 0) {
    slice_max_out[row * num_slices + slice] = s_max;
    slice_sum_out[row * num_slices + slice] = block_sum;
  }
}

}  // namespace sampling

void slice_softmax_stats(float* slice_max, float* slice_sum, const __nv_bfloat16* logits, uint32_t rows,
                         uint32_t vocab, uint32_t num_slices, cudaStream_t stream) {
  constexpr int kBlockThreads = 256;
  const dim3 grid(rows, num_slices);
  sampling::slice_softmax_stats_kernel<__nv_bfloat16, kBlockThreads>
      <<<grid, kBlockThreads, 0, stream>>>(slice_max, slice_sum, logits, vocab, num_slices);
}
