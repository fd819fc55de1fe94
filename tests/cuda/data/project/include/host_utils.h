// A project header written for host code: it needs torch (not installed here).
#pragma once
#include <torch/extension.h>

namespace serving_host {
inline void check_cuda(torch::Tensor& t) { TORCH_CHECK(t.is_cuda()); }
}  // namespace serving_host
