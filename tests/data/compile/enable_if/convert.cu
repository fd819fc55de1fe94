// A conversion kernel enabled for floating-point element types only, through its return type.
#include <cuda_fp16.h>
#include <type_traits>

template <typename T, int VEC>
__global__ std::enable_if_t<std::is_same_v<T, float> || std::is_same_v<T, __half>> to_float_kernel(
    float* __restrict__ out, const T* __restrict__ in, int n) {
  const int base = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
#pragma unroll
  for (int v = 0; v < VEC; ++v) {
    if (base + v < n) out[base + v] = static_cast<float>(in[base + v]);
  }
}

void to_float(float* out, const __half* in, int n, cudaStream_t stream) {
  constexpr int vec = 2;
  to_float_kernel<__half, vec><<<(n / vec + 127) / 128, 128, 0, stream>>>(out, in, n);
}
