// RMSNorm for decode-sized batches of short rows, in the style of inference kernels that pack several small rows into
// one block: the kernel numbers its rows by the most rows a block may hold (a template parameter, so the row index
// folds to a shift), while the launcher gives the block only as many rows as there are when the batch is smaller
// than that. The block is (threads per row, rows): threadIdx.y picks the block's row, threadIdx.x walks it, and a
// row's threads are one warp, so its sum of squares is reduced by shuffles alone. And a softmax over rows of two
// warps, the count of rows per block passed by the launcher, the two warps of a row meeting in the row's own slice
// of shared memory.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math_constants.h>
#include <stdint.h>

namespace decode {

constexpr int kWarpSize = 32;

template <typename T, int kMaxRowsPerBlock>
__global__ void grouped_rms_norm_kernel(T* __restrict__ out, const T* __restrict__ in, const T* __restrict__ gamma,
                                        const int rows, const int cols, const float eps) {
  const int row = blockIdx.x * kMaxRowsPerBlock + threadIdx.y;
  if (row >= rows) return;  // a row's threads leave together
  const int64_t base = static_cast<int64_t>(row) * cols;

  float sum_sq = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = static_cast<float>(in[base + c]);
    sum_sq += v * v;
  }
#pragma unroll
  for (int lane_mask = kWarpSize / 2; lane_mask > 0; lane_mask >>= 1) {
    sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, lane_mask);
  }
  const float inv_rms = rsqrtf(sum_sq / cols + eps);

  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    out[base + c] = static_cast<T>(static_cast<float>(in[base + c]) * inv_rms * static_cast<float>(gamma[c]));
  }
}

template <typename T, int kMaxRowsPerBlock, int kWarpsPerRow>
__global__ void grouped_softmax_kernel(T* __restrict__ out, const T* __restrict__ in, const int rows, const int cols,
                                       const int rows_per_block) {
  __shared__ float row_max[kMaxRowsPerBlock][kWarpsPerRow];
  __shared__ float row_sum[kMaxRowsPerBlock][kWarpsPerRow];
  const int row = blockIdx.x * rows_per_block + threadIdx.y;
  if (row >= rows) return;
  const T* x = in + static_cast<int64_t>(row) * cols;
  T* y = out + static_cast<int64_t>(row) * cols;
  const int warp = threadIdx.x / kWarpSize;

  float m = -CUDART_INF_F;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, static_cast<float>(x[c]));
#pragma unroll
  for (int lane_mask = kWarpSize / 2; lane_mask > 0; lane_mask >>= 1) {
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, lane_mask));
  }
  if (threadIdx.x % kWarpSize == 0) row_max[threadIdx.y][warp] = m;
  __syncthreads();
  float row_m = row_max[threadIdx.y][0];
  for (int w = 1; w < kWarpsPerRow; ++w) row_m = fmaxf(row_m, row_max[threadIdx.y][w]);

  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(static_cast<float>(x[c]) - row_m);
#pragma unroll
  for (int lane_mask = kWarpSize / 2; lane_mask > 0; lane_mask >>= 1) {
    s += __shfl_xor_sync(0xffffffffu, s, lane_mask);
  }
  if (threadIdx.x % kWarpSize == 0) row_sum[threadIdx.y][warp] = s;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < kWarpsPerRow; ++w) total += row_sum[threadIdx.y][w];
  const float inv_total = 1.f / total;

  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    y[c] = static_cast<T>(__expf(static_cast<float>(x[c]) - row_m) * inv_total);
  }
}

}  // namespace decode

// Up to eight rows per block of warps; a smaller batch gets a block of exactly its rows and one block in all.
template <typename T>
cudaError_t grouped_rms_norm(T* out, const T* in, const T* gamma, int rows, int cols, float eps,
                             cudaStream_t stream) {
  constexpr int kMaxRows = 8;
  const int rows_per_block = rows < kMaxRows ? rows : kMaxRows;
  const dim3 block(decode::kWarpSize, rows_per_block);
  const dim3 grid((rows + kMaxRows - 1) / kMaxRows);
  decode::grouped_rms_norm_kernel<T, kMaxRows><<<grid, block, 0, stream>>>(out, in, gamma, rows, cols, eps);
  return cudaGetLastError();
}

// Two warps per row, up to four rows per block: a smaller batch gets one block of exactly its rows.
template <typename T>
cudaError_t grouped_softmax(T* out, const T* in, int rows, int cols, cudaStream_t stream) {
  constexpr int kMaxRows = 4;
  const int rows_per_block = rows < kMaxRows ? rows : kMaxRows;
  const dim3 block(2 * decode::kWarpSize, rows_per_block);
  const dim3 grid((rows + rows_per_block - 1) / rows_per_block);
  decode::grouped_softmax_kernel<T, kMaxRows, 2><<<grid, block, 0, stream>>>(out, in, rows, cols, rows_per_block);
  return cudaGetLastError();
}

template cudaError_t grouped_rms_norm<__half>(__half*, const __half*, const __half*, int, int, float, cudaStream_t);
template cudaError_t grouped_softmax<float>(float*, const float*, int, int, cudaStream_t);
