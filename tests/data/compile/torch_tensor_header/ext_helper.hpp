// An extension's helper header, the way CUDA op libraries write one: torch's headers for the host code beside the
// kernels, using-declarations of its tensor and half types, and the grid-stride loop macro the kernels use.
#pragma once
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

using at::Half;
using at::Tensor;
using phalf = at::Half;

#define GRID_STRIDE_LOOP(i, n) for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)
