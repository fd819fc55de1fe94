// RMSNorm for decode-sized batches of short rows, in the style of inference kernels that pack several small rows into
// one block: the kernel numbers its rows by the most rows a block may hold (a template parameter, so the row index
// folds to a shift), while the launcher gives the block only as many rows as there are when the batch is smaller
// than that. The block is (threads per row, rows): threadIdx.y picks the block's row, threadIdx.x walks it, and a
// row's threads are one warp, so its sum of squares is reduced by shuffles alone.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
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

template cudaError_t grouped_rms_norm<__half>(__half*, const __half*, const __half*, int, int, float, cudaStream_t);
