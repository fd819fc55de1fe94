// Conversions between bfloat16 and float, in a header that takes bfloat16 from torch (whose header brings
// CUDA's <cuda_bf16.h> when nvcc compiles it).
#pragma once
#include <torch/headeronly/util/BFloat16.h>

__device__ __forceinline__ float bf16_to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ __nv_bfloat16 float_to_bf16(float v) { return __float2bfloat16(v); }
