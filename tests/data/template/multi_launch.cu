// Launch sites that disagree on the block size, and one whose block size is only known at run time.
__global__ void fill_kernel(float* x, float value, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = value;
}

__global__ void negate_kernel(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = -x[i];
}

void fill(float* x, float value, int n, bool small) {
  if (small) {
    fill_kernel<<<(n + 127) / 128, 128>>>(x, value, n);
  } else {
    fill_kernel<<<(n + 255) / 256, 256>>>(x, value, n);
  }
}

void negate(float* x, int n, int threads) {
  negate_kernel<<<(n + threads - 1) / threads, threads>>>(x, n);
}
