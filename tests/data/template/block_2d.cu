// A 2-D tiled transpose: 2-D blocks and grid.
__global__ void transpose_kernel(float* out, const float* in, int rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int r = blockIdx.y * blockDim.y + threadIdx.y;
  if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
}

void transpose(float* out, const float* in, int rows, int cols) {
  dim3 block(16, 16);
  dim3 grid((cols + 15) / 16, (rows + 15) / 16);
  transpose_kernel<<<grid, block>>>(out, in, rows, cols);
}
