// A stand-in for PyTorch's CUDA context header (see ../../torch/extension.h): declarations only.
#pragma once
#include <cuda_runtime.h>

namespace at::cuda {
struct OptionalCUDAGuard {
  explicit OptionalCUDAGuard(at::Device) {}
};
inline cudaStream_t getCurrentCUDAStream() { return nullptr; }
}  // namespace at::cuda
