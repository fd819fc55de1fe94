// Bias + GELU over a [num_tokens, d] activation, one element per thread: the index is the global thread id,
// and threads past the end return early. Written the way most elementwise serving code is: 64-bit index,
// 256 threads per block, a grid that covers the tensor once, and no loop for a tuner to reshape.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace serving {

__device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678f)); }

template <typename T>
__global__ void bias_gelu_kernel(T* __restrict__ out,         // [num_tokens, d]
                                 const T* __restrict__ input,  // [num_tokens, d]
                                 const T* __restrict__ bias,   // [d]
                                 const int64_t numel, const int d) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= numel) return;
  const float x = static_cast<float>(input[i]) + static_cast<float>(__ldg(&bias[i % d]));
  out[i] = static_cast<T>(gelu_erf(x));
}

}  // namespace serving

void bias_gelu_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, const __nv_bfloat16* bias, int64_t num_tokens,
                    int d, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t numel = num_tokens * d;
  const int64_t blocks = (numel + kThreads - 1) / kThreads;
  serving::bias_gelu_kernel<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(out, input, bias, numel, d);
}
