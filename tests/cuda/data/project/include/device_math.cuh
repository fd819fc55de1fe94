// A project header with device helpers the kernel uses.
#pragma once
namespace serving {
__device__ __forceinline__ float square(float x) { return x * x; }
}  // namespace serving
