// A fused Adam step over per-primitive parameters, in the style of differentiable-rendering code (Gaussian
// splatting): the element index is the grid's rank as a cooperative group (`cg::this_grid().thread_rank()`), one
// element per thread past an early return, moments kept in fp32; and a clamp of the updated parameters whose
// grid-stride loop steps by the grid group's size. The host code launches 1-D grids that cover the parameters.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace cg = cooperative_groups;

namespace splat {

__global__ void group_rank_adam_kernel(float* __restrict__ param, const float* __restrict__ grad,
                                       float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq,
                                       const uint32_t numel, const float lr, const float b1, const float b2,
                                       const float eps) {
  const auto idx = cg::this_grid().thread_rank();
  if (idx >= numel) return;
  const float g = grad[idx];
  const float m = b1 * exp_avg[idx] + (1.0f - b1) * g;
  const float v = b2 * exp_avg_sq[idx] + (1.0f - b2) * g * g;
  exp_avg[idx] = m;
  exp_avg_sq[idx] = v;
  param[idx] -= lr * m / (sqrtf(v) + eps);
}

__global__ void group_clamp_kernel(float* __restrict__ param, const int64_t numel, const float lo, const float hi) {
  cg::grid_group grid = cg::this_grid();
  for (int64_t i = grid.thread_rank(); i < numel; i += grid.size()) {
    param[i] = fminf(fmaxf(param[i], lo), hi);
  }
}

}  // namespace splat

void group_rank_adam(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, uint32_t numel, float lr,
                     float b1, float b2, float eps, float lo, float hi, cudaStream_t stream) {
  constexpr uint32_t kThreads = 256;
  const uint32_t blocks = (numel + kThreads - 1) / kThreads;
  splat::group_rank_adam_kernel<<<blocks, kThreads, 0, stream>>>(param, grad, exp_avg, exp_avg_sq, numel, lr, b1, b2,
                                                                 eps);
  splat::group_clamp_kernel<<<dim3(blocks, 1, 1), dim3(kThreads), 0, stream>>>(param, numel, lo, hi);
}
