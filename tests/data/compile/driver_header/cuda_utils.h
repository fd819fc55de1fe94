// A project header of the kind serving repositories keep beside their kernels: it includes the CUDA driver
// API for its host-side error checks and defines the device helpers the kernels share.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <type_traits>

#define CU_CHECK(expr)                                  \
  do {                                                  \
    CUresult status_ = (expr);                          \
    if (status_ != CUDA_SUCCESS) abort();               \
  } while (0)

#if CUDA_VERSION >= 11000  // the toolkits this project supports
template <typename T>
__device__ __forceinline__ T silu(T x) {
  static_assert(std::is_floating_point<T>::value, "SiLU of a floating-point value");
  return x == -INFINITY ? T(0) : x / (T(1) + __expf(-x));  // INFINITY: <math.h>'s, through <cuda.h>
}

__device__ __forceinline__ uint32_t lane_of(uint32_t thread) { return thread % 32u; }
#endif
