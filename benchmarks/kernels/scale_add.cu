// A trivial elementwise kernel (y = a * x + y) for measuring tuner throughput: compile, check and
// time cost dominate, not the kernel. One element per thread with a bounds check, the launch's
// 256 threads per block hard-coded: the shape cutune's recipes and Kernel Tuner both handle.
__global__ void scale_add(float* __restrict__ y, const float* __restrict__ x, const float a, const int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = a * x[i] + y[i];
  }
}

void launch_scale_add(float* y, const float* x, float a, int n) {
  scale_add<<<(n + 255) / 256, 256>>>(y, x, a, n);
}
