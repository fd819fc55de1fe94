// An early return inside a loop: it cannot become `continue` of an items-per-thread loop.
__global__ void clamp_rows_kernel(float* x, int n, int width) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  for (int j = 0; j < width; ++j) {
    if (x[i * width + j] < 0.f) return;
    x[i * width + j] *= 2.f;
  }
}

void clamp_rows(float* x, int n, int width) {
  clamp_rows_kernel<<<(n + 127) / 128, 128>>>(x, n, width);
}
