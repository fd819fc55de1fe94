// __launch_bounds__ in its 1-, 2- and 3-argument forms, and unroll pragmas with factors.
template <typename T>
__global__ void __launch_bounds__(256) square_kernel(T* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * x[i];
}

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 4) dot4_kernel(const T* a, const T* b, T* out, int n) {
  const int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i >= n) return;
  T acc = 0;
#pragma unroll 4
  for (int k = 0; k < 4; ++k) acc += a[4 * i + k] * b[4 * i + k];
  float scale = 1.f;
#pragma unroll 2
  for (int k = 0; k < n % 8; ++k) scale *= 0.5f;
  out[i] = acc * scale;
}

__global__ void __launch_bounds__(128, 2, 2) cluster_kernel(float* x) {
  x[blockIdx.x * 128 + threadIdx.x] += 1.f;
}

void run(float* x, const float* a, const float* b, float* out, int n) {
  square_kernel<float><<<(n + 255) / 256, 256>>>(x, n);
  constexpr int kBlock = 128;
  dot4_kernel<float, kBlock><<<(n + kBlock - 1) / kBlock, kBlock>>>(a, b, out, n);
}
