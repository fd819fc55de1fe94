// Kernels whose block size is their own template parameter, launched the ways serving code does:
// through a host function template, a switch over literal cases, and a dispatch macro.
#include <cuda_runtime.h>
#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <cstdint>

namespace serving {

// one block per row; the block reduction is sized by the template parameter
template <typename T, int NUM_THREADS>
__global__ void row_sum_kernel(T* __restrict__ out, const T* __restrict__ in, const int d) {
  static_assert(NUM_THREADS % 32 == 0, "whole warps");
  using BlockReduce = cub::BlockReduce<float, NUM_THREADS>;
  __shared__ typename BlockReduce::TempStorage tmp;
  float acc = 0.f;
  for (int i = threadIdx.x; i < d; i += NUM_THREADS) {
    acc += static_cast<float>(in[static_cast<int64_t>(blockIdx.x) * d + i]);
  }
  const float total = BlockReduce(tmp).Sum(acc);
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<T>(total);
}

template <typename T, int NUM_THREADS>
void launch_row_sum(T* out, const T* in, int rows, int d, cudaStream_t stream) {
  row_sum_kernel<T, NUM_THREADS><<<rows, NUM_THREADS, 0, stream>>>(out, in, d);
}

void row_sum(float* out, const float* in, int rows, int d, cudaStream_t stream) {
  launch_row_sum<float, 256>(out, in, rows, d, stream);
}

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// a row maximum whose launcher picks the block size from the row length
template <typename T, int NUM_THREADS>
__global__ void row_max_kernel(T* __restrict__ out, const T* __restrict__ in, const int d) {
  using BlockReduce = cub::BlockReduce<float, NUM_THREADS>;
  __shared__ typename BlockReduce::TempStorage tmp;
  float best = -INFINITY;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    best = fmaxf(best, static_cast<float>(in[static_cast<int64_t>(blockIdx.x) * d + i]));
  }
  const float m = BlockReduce(tmp).Reduce(best, MaxOp());
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<T>(m);
}

void row_max(float* out, const float* in, int rows, int d, cudaStream_t stream) {
  const int threads = d >= 4096 ? 1024 : d >= 1024 ? 512 : 128;
  switch (threads) {
    case 128:
      row_max_kernel<float, 128><<<rows, 128, 0, stream>>>(out, in, d);
      break;
    case 512:
      row_max_kernel<float, 512><<<rows, 512, 0, stream>>>(out, in, d);
      break;
    default:
      row_max_kernel<float, 1024><<<rows, 1024, 0, stream>>>(out, in, d);
      break;
  }
}

// a scale whose dispatch macro instantiates the kernel with a literal block size
template <typename T, int NUM_THREADS>
__global__ void row_scale_kernel(T* __restrict__ out, const T* __restrict__ in, const float scale, const int d) {
  for (int i = threadIdx.x; i < d; i += NUM_THREADS) {
    const int64_t at = static_cast<int64_t>(blockIdx.x) * d + i;
    out[at] = static_cast<T>(static_cast<float>(in[at]) * scale);
  }
}

#define LAUNCH_ROW_SCALE(THREADS) \
  row_scale_kernel<float, THREADS><<<rows, THREADS, 0, stream>>>(out, in, scale, d)

void row_scale(float* out, const float* in, float scale, int rows, int d, cudaStream_t stream) {
  LAUNCH_ROW_SCALE(256);
}

// the same kernel shape, dispatched through the macro with two sizes
template <typename T, int NUM_THREADS>
__global__ void row_copy_kernel(T* __restrict__ out, const T* __restrict__ in, const int d) {
  for (int i = threadIdx.x; i < d; i += NUM_THREADS) {
    const int64_t at = static_cast<int64_t>(blockIdx.x) * d + i;
    out[at] = in[at];
  }
}

#define LAUNCH_ROW_COPY(THREADS) row_copy_kernel<float, THREADS><<<rows, THREADS, 0, stream>>>(out, in, d)

void row_copy(float* out, const float* in, int rows, int d, cudaStream_t stream) {
  if (d > 2048) {
    LAUNCH_ROW_COPY(512);
  } else {
    LAUNCH_ROW_COPY(128);
  }
}

}  // namespace serving
