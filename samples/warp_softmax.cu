// Softmax over short rows (attention scores), a warp per row and four rows per block, in the style of training
// kernels that keep a thread's share of the row in registers: kIters rounds of a warp's width, the count a template
// parameter the host picks from the row's length, the bounds check inside each round, the row's pointers moved to
// the thread's first element; the row's maximum and sum are reduced by the warp's shuffles.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math_constants.h>

namespace training {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 4;

template <typename T, int kIters>
__global__ void warp_softmax_kernel(T* __restrict__ dst, const T* __restrict__ src, const int rows, const int cols) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  const int first = row * cols + threadIdx.x;
  src += first;
  dst += first;

  float vals[kIters];
  float row_max = -CUDART_INF_F;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int col = threadIdx.x + it * kWarp;
    if (col < cols) {
      vals[it] = static_cast<float>(src[it * kWarp]);
      row_max = fmaxf(row_max, vals[it]);
    }
  }
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, o));

  float total = 0.f;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int col = threadIdx.x + it * kWarp;
    if (col < cols) {
      vals[it] = __expf(vals[it] - row_max);
      total += vals[it];
    }
  }
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
  const float inv = 1.f / total;

#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int col = threadIdx.x + it * kWarp;
    if (col < cols) dst[it * kWarp] = static_cast<T>(vals[it] * inv);
  }
}

}  // namespace training

template <typename T>
cudaError_t warp_softmax(T* dst, const T* src, int rows, int cols, cudaStream_t stream) {
  using training::kRowsPerBlock;
  using training::kWarp;
  const dim3 grid((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  const dim3 block(kWarp, kRowsPerBlock);
  if (cols <= 128) {
    training::warp_softmax_kernel<T, 4><<<grid, block, 0, stream>>>(dst, src, rows, cols);
  } else if (cols <= 512) {
    training::warp_softmax_kernel<T, 16><<<grid, block, 0, stream>>>(dst, src, rows, cols);
  } else if (cols <= 2048) {
    training::warp_softmax_kernel<T, 64><<<grid, block, 0, stream>>>(dst, src, rows, cols);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template cudaError_t warp_softmax<__half>(__half*, const __half*, int, int, cudaStream_t);
