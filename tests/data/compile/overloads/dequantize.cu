// Two overloads of one dequantization kernel: a scale per group of elements, or one scale for the tensor.
#include <cstdint>

template <typename T, int GROUP>
__global__ void dequantize_kernel(T* __restrict__ out, const int8_t* __restrict__ in, const float* __restrict__ scales,
                                  int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<T>(scales[i / GROUP] * in[i]);
}

template <typename T, int GROUP>
__global__ void dequantize_kernel(T* __restrict__ out, const int8_t* __restrict__ in, float scale, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<T>(scale * in[i]);
}

void dequantize(float* out, const int8_t* in, const float* scales, int n, cudaStream_t stream) {
  dequantize_kernel<float, 128><<<(n + 255) / 256, 256, 0, stream>>>(out, in, scales, n);
}
