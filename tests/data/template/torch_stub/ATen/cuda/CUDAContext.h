// TEST-ONLY stand-in for torch's <ATen/cuda/CUDAContext.h>: the current stream.
#pragma once
#include <cuda_runtime.h>

namespace at::cuda {
cudaStream_t getCurrentCUDAStream();
}  // namespace at::cuda
