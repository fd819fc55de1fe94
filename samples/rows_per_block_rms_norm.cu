// RMSNorm over short and mid-sized rows, several rows per block, in the style of serving kernels that pack small
// rows into one block: the block is (threads per row, rows per block), threadIdx.y picks the block's row and
// threadIdx.x walks it; the launch rounds the rows up to whole blocks and the spare rows leave at once. A row's
// threads are a few warps: each warp sums its squares by shuffles, then the row's warps meet in the row's own
// slice of shared memory (a slice per threadIdx.y, so the rows of a block never share a value). And the fused
// residual add + RMSNorm of decode-sized batches with a warp per row of a 1-D block: the warp's index picks the row
// (the warps per block a template parameter), its lanes walk it, its shuffles reduce it.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace serving {

constexpr int kWarpSize = 32;
constexpr int kMaxRowsPerBlock = 8;
constexpr int kMaxWarpsPerRow = 8;

template <typename T>
__global__ void rows_per_block_rms_norm_kernel(T* __restrict__ out, const T* __restrict__ in,
                                               const T* __restrict__ weight, const int rows, const int cols,
                                               const float eps) {
  __shared__ float row_partials[kMaxRowsPerBlock][kMaxWarpsPerRow];
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;  // the whole row of threads leaves together
  const T* row_in = in + static_cast<int64_t>(row) * cols;
  T* row_out = out + static_cast<int64_t>(row) * cols;

  float sum_sq = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = static_cast<float>(row_in[c]);
    sum_sq += v * v;
  }
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) {
    sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
  }
  const int warp = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (lane == 0) row_partials[threadIdx.y][warp] = sum_sq;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < blockDim.x / kWarpSize; ++w) total += row_partials[threadIdx.y][w];
  const float inv_rms = rsqrtf(total / cols + eps);

  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    row_out[c] = static_cast<T>(static_cast<float>(row_in[c]) * inv_rms * static_cast<float>(weight[c]));
  }
}

template <typename T, int kWarpsPerBlock>
__global__ void warp_rows_add_rms_norm_kernel(T* __restrict__ out, T* __restrict__ residual, const T* __restrict__ in,
                                              const T* __restrict__ weight, const int rows, const int cols,
                                              const float eps) {
  const int warp_id = threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  const int row = blockIdx.x * kWarpsPerBlock + warp_id;
  if (row >= rows) return;  // a whole warp leaves
  const int64_t offset = static_cast<int64_t>(row) * cols;

  float sum_sq = 0.f;
  for (int c = lane; c < cols; c += kWarpSize) {
    const float v = static_cast<float>(in[offset + c]) + static_cast<float>(residual[offset + c]);
    residual[offset + c] = static_cast<T>(v);
    sum_sq += v * v;
  }
#pragma unroll
  for (int mask = kWarpSize / 2; mask > 0; mask >>= 1) {
    sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, mask);
  }
  const float inv_rms = rsqrtf(sum_sq / cols + eps);

  for (int c = lane; c < cols; c += kWarpSize) {
    out[offset + c] = static_cast<T>(static_cast<float>(residual[offset + c]) * inv_rms * static_cast<float>(weight[c]));
  }
}

}  // namespace serving

// Two warps per row up to 512 columns (four rows per block), four warps beyond (two rows per block).
template <typename T>
cudaError_t rows_per_block_rms_norm(T* out, const T* in, const T* weight, int rows, int cols, float eps,
                                    cudaStream_t stream) {
  const int threads_per_row = cols <= 512 ? 2 * serving::kWarpSize : 4 * serving::kWarpSize;
  const int rows_per_block = 256 / threads_per_row;
  const dim3 block(threads_per_row, rows_per_block);
  const dim3 grid((rows + rows_per_block - 1) / rows_per_block);
  serving::rows_per_block_rms_norm_kernel<T><<<grid, block, 0, stream>>>(out, in, weight, rows, cols, eps);
  return cudaGetLastError();
}

// Four warps, four rows, per block of 128 threads.
template <typename T>
cudaError_t warp_rows_add_rms_norm(T* out, T* residual, const T* in, const T* weight, int rows, int cols, float eps,
                                   cudaStream_t stream) {
  const int blocks = (rows + 3) / 4;
  serving::warp_rows_add_rms_norm_kernel<T, 4>
      <<<blocks, 4 * serving::kWarpSize, 0, stream>>>(out, residual, in, weight, rows, cols, eps);
  return cudaGetLastError();
}

template cudaError_t rows_per_block_rms_norm<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*,
                                                            const __nv_bfloat16*, int, int, float, cudaStream_t);
template cudaError_t warp_rows_add_rms_norm<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, const __nv_bfloat16*,
                                                           const __nv_bfloat16*, int, int, float, cudaStream_t);
