// Softmax backward over long rows (the arbitrary-length path of training stacks' attention softmax): a warp per row
// and four rows per block on the block's y axis, the row walked by `while` loops over one index that the second pass
// restarts, the dot product of the incoming gradient and the softmax's output reduced by the warp's shuffles.
//   grad[r, i] = out[r, i] * (grad[r, i] - sum_j grad[r, j] * out[r, j])
#include <cuda_runtime.h>

#include <cstdint>

namespace training {

__global__ void softmax_backward_long_kernel(float* __restrict__ grad,       // [rows, cols]: dL/dy in, dL/dx out
                                             const float* __restrict__ out,  // [rows, cols]: the softmax's output
                                             const int rows, const int cols) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  grad += static_cast<int64_t>(row) * cols;
  out += static_cast<int64_t>(row) * cols;

  float dot = 0.0f;
  int col = threadIdx.x;
  while (col < cols) {
    dot += grad[col] * out[col];
    col += blockDim.x;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, offset);

  col = threadIdx.x;
  while (col < cols) {
    grad[col] = out[col] * (grad[col] - dot);
    col += blockDim.x;
  }
}

}  // namespace training

void softmax_backward_long(float* grad, const float* out, int rows, int cols, cudaStream_t stream) {
  constexpr int kRowsPerBlock = 4;
  const dim3 block(32, kRowsPerBlock);
  const dim3 grid((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  training::softmax_backward_long_kernel<<<grid, block, 0, stream>>>(grad, out, rows, cols);
}
