// Loop macros shared by the elementwise samples, in the style of code bases that write every elementwise kernel
// through one grid-stride macro.
#pragma once

// every index of [0, n) once: each thread of the grid takes every (blockDim.x * gridDim.x)-th one
#define KERNEL_LOOP(i, n)                                                                  \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
