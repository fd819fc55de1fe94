// Row reductions written with cooperative groups: a LayerNorm whose block sums go through a warp tile's
// shfl_down, the warps' partials through shared memory, a second shfl_down over them and a broadcast from lane 0
// (`g.shfl(sum, 0)`); the variance is finished in place (`variance /= hidden; variance += eps;`) and stored per
// row for the backward pass. And a warp-per-row RMSNorm whose shuffles go through a wrapper without a mask.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

namespace warp_ops {
// a shuffle over the whole warp, its mask implied
__device__ __forceinline__ float shfl_xor_sync(float v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
}  // namespace warp_ops

constexpr int kWarp = 32;
constexpr int kMaxWarps = 32;

__global__ void tile_layer_norm_kernel(float* __restrict__ out, float* __restrict__ rstd_out,
                                       const float* __restrict__ in, const float* __restrict__ gamma,
                                       const float* __restrict__ beta, int hidden, float eps, bool training) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<kWarp> g = cg::tiled_partition<kWarp>(block);
  __shared__ float partials[kMaxWarps];
  const int row = blockIdx.x;
  const int tid = threadIdx.x;
  const int warps = blockDim.x / kWarp;
  in += static_cast<long long>(row) * hidden;
  out += static_cast<long long>(row) * hidden;

  float sum = 0.f;
  for (int i = tid; i < hidden; i += blockDim.x) sum += in[i];
  for (int i = 1; i < kWarp; i *= 2) sum += g.shfl_down(sum, i);
  if (g.thread_rank() == 0) partials[tid / kWarp] = sum;
  block.sync();
  if (g.thread_rank() < warps) sum = partials[g.thread_rank()];
  block.sync();
  for (int i = 1; i < warps; i *= 2) sum += g.shfl_down(sum, i);
  sum = g.shfl(sum, 0);
  const float mean = sum / hidden;

  float variance = 0.f;
  for (int i = tid; i < hidden; i += blockDim.x) {
    const float d = in[i] - mean;
    variance += d * d;
  }
  for (int i = 1; i < kWarp; i *= 2) variance += g.shfl_down(variance, i);
  if (g.thread_rank() == 0) partials[tid / kWarp] = variance;
  block.sync();
  if (g.thread_rank() < warps) variance = partials[g.thread_rank()];
  block.sync();
  for (int i = 1; i < warps; i *= 2) variance += g.shfl_down(variance, i);
  variance = g.shfl(variance, 0);
  variance /= hidden;
  variance += eps;
  const float rstd = rsqrtf(variance);
  if (training)
    if (tid == 0) rstd_out[row] = rstd;

  for (int i = tid; i < hidden; i += blockDim.x) out[i] = (in[i] - mean) * rstd * gamma[i] + beta[i];
}

// one warp per row: the warp's shuffles, unrolled by hand, are the whole block's reduction
template <typename T>
__global__ void warp_rms_norm_kernel(T* __restrict__ out, const T* __restrict__ in, const T* __restrict__ weight,
                                     int hidden, float eps) {
  const T* x = in + static_cast<long long>(blockIdx.x) * hidden;
  float sum_sq = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = static_cast<float>(x[i]);
    sum_sq += v * v;
  }
  sum_sq += warp_ops::shfl_xor_sync(sum_sq, 16);
  sum_sq += warp_ops::shfl_xor_sync(sum_sq, 8);
  sum_sq += warp_ops::shfl_xor_sync(sum_sq, 4);
  sum_sq += warp_ops::shfl_xor_sync(sum_sq, 2);
  sum_sq += warp_ops::shfl_xor_sync(sum_sq, 1);
  sum_sq /= hidden;
  const float rms_rcp = rsqrtf(sum_sq + eps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    out[static_cast<long long>(blockIdx.x) * hidden + i] =
        static_cast<T>(static_cast<float>(x[i]) * rms_rcp * static_cast<float>(weight[i]));
  }
}

void launch(float* out, float* rstd, const float* in, const float* gamma, const float* beta, int rows, int hidden,
            cudaStream_t stream) {
  tile_layer_norm_kernel<<<rows, 256, 0, stream>>>(out, rstd, in, gamma, beta, hidden, 1e-5f, true);
  warp_rms_norm_kernel<float><<<rows, 32, 0, stream>>>(out, in, gamma, hidden, 1e-6f);
}
