// A project header of the kind serving repositories keep beside their kernels: it includes the CUDA driver
// API for its host-side error checks and defines the device helpers the kernels share.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#define CU_CHECK(expr)                                  \
  do {                                                  \
    CUresult status_ = (expr);                          \
    if (status_ != CUDA_SUCCESS) abort();               \
  } while (0)

__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }
