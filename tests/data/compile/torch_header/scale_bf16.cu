// Scales a bfloat16 array; torch is reached only through the project header.
#include "type_convert.cuh"

__global__ void scale_bf16_kernel(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in,
                                  float scale, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = float_to_bf16(scale * bf16_to_float(in[i]));
}

void scale_bf16(__nv_bfloat16* out, const __nv_bfloat16* in, float scale, int n, cudaStream_t stream) {
  scale_bf16_kernel<<<(n + 255) / 256, 256, 0, stream>>>(out, in, scale, n);
}
