// Gated activation through a device helper: out[t, i] = act(x[t, i]) * x[t, d + i] for a [num_tokens, 2 * d]
// input, written the way serving libraries share one row loop among several activations: the kernel calls a
// `__device__` template that takes the activation as a function-pointer template parameter, and the loop
// (one block per token, a scalar element per thread per iteration) lives in that helper.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace serving {

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

__device__ __forceinline__ float gelu_tanh(float x) {
  const float inner = 0.7978845608f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

// one token's row: act(gate) * up, the block's threads striding over its d columns
template <typename T, float (*Act)(float)>
__device__ void act_and_mul_row(T* __restrict__ out, const T* __restrict__ row, const int d) {
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const float gate = static_cast<float>(row[i]);
    const float up = static_cast<float>(row[d + i]);
    out[i] = static_cast<T>(Act(gate) * up);
  }
}

template <typename T, float (*Act)(float)>
__global__ void gated_act_kernel(T* __restrict__ out,          // [num_tokens, d]
                                 const T* __restrict__ input,  // [num_tokens, 2 * d]
                                 const int d) {
  const int64_t token = blockIdx.x;
  act_and_mul_row<T, Act>(out + token * d, input + token * 2 * d, d);
}

}  // namespace serving

void silu_and_mul_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, int num_tokens, int d, cudaStream_t stream) {
  serving::gated_act_kernel<__nv_bfloat16, serving::silu><<<num_tokens, std::min(d, 1024), 0, stream>>>(out, input, d);
}

void gelu_and_mul_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, int num_tokens, int d, cudaStream_t stream) {
  serving::gated_act_kernel<__nv_bfloat16, serving::gelu_tanh><<<num_tokens, std::min(d, 1024), 0, stream>>>(
      out, input, d);
}
