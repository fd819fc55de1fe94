// A stand-in for the few declarations of PyTorch's C++ API the samples' host code uses, so that nvcc can
// compile a whole applied sample here (no torch install): types and signatures only, no behaviour.
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace at {
enum class ScalarType { Float, Half, BFloat16 };
struct Device {};
}  // namespace at

namespace torch {
struct Tensor {
  int64_t size(int) const { return 0; }
  int64_t stride(int) const { return 0; }
  int64_t numel() const { return 0; }
  at::ScalarType scalar_type() const { return at::ScalarType::Float; }
  void* data_ptr() const { return nullptr; }
  template <typename T>
  T* data_ptr() const { return nullptr; }
};
}  // namespace torch

inline at::Device device_of(const torch::Tensor&) { return {}; }

// every branch instantiated, as the real macro does
#define AT_DISPATCH_FLOATING_TYPES_AND2(A, B, TYPE, NAME, ...) \
  [&] {                                                       \
    { using scalar_t = float; __VA_ARGS__(); }                \
    { using scalar_t = __half; __VA_ARGS__(); }               \
    { using scalar_t = __nv_bfloat16; __VA_ARGS__(); }        \
  }()
