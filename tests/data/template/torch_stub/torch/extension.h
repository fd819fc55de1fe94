// TEST-ONLY stand-in for torch's <torch/extension.h> (torch is not installed where the CPU tests run):
// just the Tensor members the samples' host code calls, so nvcc can compile the host launch code.
#pragma once
#include <cstdint>

namespace at {
enum class ScalarType { Half, BFloat16, Float };
class Tensor {
 public:
  int64_t size(int64_t dim) const;
  int64_t numel() const;
  int64_t element_size() const;
  ScalarType scalar_type() const;
  void* data_ptr() const;
  template <typename T>
  T* data_ptr() const;
};
}  // namespace at

namespace torch {
using at::Tensor;
}  // namespace torch
