// Scales each row of a bfloat16 matrix in 16-byte packs (8 elements per load). The caller guarantees that
// the row length is a multiple of 8, so rows start 16-byte aligned and no tail is left.
#include <cuda_bf16.h>

__global__ void pack_scale_kernel(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ in,
                                  float scale, int d) {
  const size_t row = blockIdx.x;
  const uint4* src = reinterpret_cast<const uint4*>(in + row * d);
  uint4* dst = reinterpret_cast<uint4*>(out + row * d);
  for (int i = threadIdx.x; i < d / 8; i += blockDim.x) {
    uint4 pack = src[i];
    __nv_bfloat162* halves = reinterpret_cast<__nv_bfloat162*>(&pack);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float2 f = __bfloat1622float2(halves[j]);
      halves[j] = __floats2bfloat162_rn(f.x * scale, f.y * scale);
    }
    dst[i] = pack;
  }
}

void pack_scale(__nv_bfloat16* out, const __nv_bfloat16* in, float scale, int tokens, int d, cudaStream_t stream) {
  pack_scale_kernel<<<tokens, 256, 0, stream>>>(out, in, scale, d);
}
