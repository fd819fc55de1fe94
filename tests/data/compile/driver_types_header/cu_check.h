// A project header whose own helpers take the CUDA driver API's types: its code, not only its macros, needs <cuda.h>.
#pragma once
#include <cuda.h>

inline bool cu_ok(CUresult status) { return status == CUDA_SUCCESS; }

__device__ __forceinline__ float twice(float x) { return 2.0f * x; }
