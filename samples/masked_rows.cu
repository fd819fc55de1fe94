// Row-masked elementwise updates over a [rows, cols] tensor, in the style of training and serving code that skips
// finished or padded rows: one element per thread, its row the flat index divided by the row length, and the bounds
// check written on the row (`if (row >= rows) return;`), not on the flat index. The first kernel scales the live
// rows in place (64-bit indices, an early return on the row mask too); the second adds a per-column bias to a copy,
// its whole body inside `if (row < rows) {...}` (32-bit unsigned indices). The host code launches 1-D grids that
// cover rows * cols once.
#include <cuda_runtime.h>

#include <cstdint>

namespace masked {

__global__ void masked_row_scale_kernel(float* __restrict__ x, const float* __restrict__ row_scale,
                                        const bool* __restrict__ live, const int64_t rows, const int64_t cols) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t row = idx / cols;
  if (row >= rows) return;
  if (live != nullptr && !live[row]) return;  // a finished row keeps its values
  x[idx] *= row_scale[row];
}

__global__ void column_bias_copy_kernel(float* __restrict__ out, const float* __restrict__ in,
                                        const float* __restrict__ bias, const uint32_t rows, const uint32_t cols) {
  const uint32_t idx = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t row = idx / cols;
  const uint32_t col = idx - row * cols;
  if (row < rows) {
    out[idx] = in[idx] + bias[col];
  }
}

}  // namespace masked

void masked_rows(float* x, const float* row_scale, const bool* live, float* out, const float* bias, int64_t rows,
                 int64_t cols, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t n = rows * cols;
  const unsigned blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  masked::masked_row_scale_kernel<<<blocks, kThreads, 0, stream>>>(x, row_scale, live, rows, cols);
  masked::column_bias_copy_kernel<<<blocks, kThreads, 0, stream>>>(out, x, bias, static_cast<uint32_t>(rows),
                                                                   static_cast<uint32_t>(cols));
}
