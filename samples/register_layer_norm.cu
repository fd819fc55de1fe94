// LayerNorm forward and input gradient for training, in the style of transformer-training kernels that keep a
// thread's share of the row in a local array between passes: one block per row, each thread holds the elements
// `tid, tid + blockDim.x, ...` in `row_vals[]`, loops over the whole rounds of the block and handles the last,
// partial round apart; block sums go through a warp tile's shuffles and shared memory. The launch guarantees
// hidden <= kRegsPerThread * blockDim.x (the host code below picks the block from the row length).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

namespace training {

constexpr int kWarpSize = 32;
constexpr int kMaxWarps = 32;
#define REGS_PER_THREAD 16

__global__ void layer_norm_fwd_kernel(float* __restrict__ out, float* __restrict__ mean_out,
                                      float* __restrict__ var_out, const float* __restrict__ in,
                                      const float* __restrict__ gamma, const float* __restrict__ beta, float eps,
                                      bool training, int hidden) {
  const int block_threads = blockDim.x;
  int rounds = hidden / block_threads;
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<kWarpSize> tile = cg::tiled_partition<kWarpSize>(block);
  const int row = blockIdx.x;
  const int tid = threadIdx.x;
  const int warps = block_threads / kWarpSize;
  __shared__ float partials[kMaxWarps];
  float row_vals[REGS_PER_THREAD];

  in += static_cast<long long>(row) * hidden;
  out += static_cast<long long>(row) * hidden;
  const int last = rounds * block_threads + tid;

  float sum = 0.f;
#pragma unroll 4
  for (int r = 0; r < rounds; r++) {
    row_vals[r] = in[r * block_threads + tid];
    sum += row_vals[r];
  }
  if (last < hidden) {
    row_vals[rounds] = in[last];
    sum += row_vals[rounds];
    rounds++;
  }
  for (int i = 1; i < kWarpSize; i *= 2) sum += tile.shfl_down(sum, i);
  if (tile.thread_rank() == 0) partials[tid / kWarpSize] = sum;
  block.sync();
  if (tile.thread_rank() < warps) sum = partials[tile.thread_rank()];
  block.sync();
  for (int i = 1; i < warps; i *= 2) sum += tile.shfl_down(sum, i);
  sum = tile.shfl(sum, 0);
  const float mean = sum / hidden;
  if (training && tid == 0) mean_out[row] = mean;

  float variance = 0.f;
  for (int r = 0; r < rounds; r++) {
    row_vals[r] -= mean;
    variance += row_vals[r] * row_vals[r];
  }
  for (int i = 1; i < kWarpSize; i *= 2) variance += tile.shfl_down(variance, i);
  if (tile.thread_rank() == 0) partials[tid / kWarpSize] = variance;
  block.sync();
  if (tile.thread_rank() < warps) variance = partials[tile.thread_rank()];
  block.sync();
  for (int i = 1; i < warps; i *= 2) variance += tile.shfl_down(variance, i);
  variance = tile.shfl(variance, 0);
  variance /= hidden;
  variance += eps;
  if (training && tid == 0) var_out[row] = variance;

  const float rstd = rsqrtf(variance);
  rounds = hidden / block_threads;
  for (int r = 0; r < rounds; r++) {
    out[r * block_threads + tid] = row_vals[r] * rstd * gamma[r * block_threads + tid] + beta[r * block_threads + tid];
  }
  if (last < hidden) out[last] = row_vals[rounds] * rstd * gamma[last] + beta[last];
}

// d(in) from d(out), given the forward's output (`invertible`: the normalised row is recovered from it through
// gamma and beta) or its normalised input, and each row's variance
__global__ void layer_norm_bwd_input_kernel(float* __restrict__ in_grad, const float* __restrict__ out_grad,
                                            const float* __restrict__ saved, const float* __restrict__ gamma,
                                            const float* __restrict__ beta, const float* __restrict__ vars,
                                            bool invertible, int hidden) {
  const int block_threads = blockDim.x;
  int rounds = hidden / block_threads;
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<kWarpSize> tile = cg::tiled_partition<kWarpSize>(block);
  const int row = blockIdx.x;
  const int tid = threadIdx.x;
  const int warps = block_threads / kWarpSize;
  __shared__ float partials[kMaxWarps];
  float grad_vals[REGS_PER_THREAD];
  float norm_vals[REGS_PER_THREAD];

  out_grad += static_cast<long long>(row) * hidden;
  saved += static_cast<long long>(row) * hidden;
  in_grad += static_cast<long long>(row) * hidden;
  const int last = rounds * block_threads + tid;

  for (int r = 0; r < rounds; r++) {
    const float g = gamma[r * block_threads + tid];
    grad_vals[r] = out_grad[r * block_threads + tid] * g;
    norm_vals[r] = invertible ? (saved[r * block_threads + tid] - beta[r * block_threads + tid]) / g
                              : saved[r * block_threads + tid];
  }
  if (last < hidden) {
    const float g = gamma[last];
    grad_vals[rounds] = out_grad[last] * g;
    norm_vals[rounds] = invertible ? (saved[last] - beta[last]) / g : saved[last];
    rounds++;
  }
  const float var = vars[row];
  const float rstd = rsqrtf(var);

  float sum = 0.f;
  for (int r = 0; r < rounds; r++) sum += grad_vals[r] * norm_vals[r];
  for (int i = 1; i < kWarpSize; i *= 2) sum += tile.shfl_down(sum, i);
  if (tile.thread_rank() == 0) partials[tid / kWarpSize] = sum;
  block.sync();
  if (tile.thread_rank() < warps) sum = partials[tile.thread_rank()];
  block.sync();
  for (int i = 1; i < warps; i *= 2) sum += tile.shfl_down(sum, i);
  sum = tile.shfl(sum, 0);
  sum /= hidden;

  for (int r = 0; r < rounds; r++) grad_vals[r] = (grad_vals[r] - sum * norm_vals[r]) * rstd;

  sum = 0.f;
  for (int r = 0; r < rounds; r++) sum += grad_vals[r];
  for (int i = 1; i < kWarpSize; i *= 2) sum += tile.shfl_down(sum, i);
  if (tile.thread_rank() == 0) partials[tid / kWarpSize] = sum;
  block.sync();
  if (tile.thread_rank() < warps) sum = partials[tile.thread_rank()];
  block.sync();
  for (int i = 1; i < warps; i *= 2) sum += tile.shfl_down(sum, i);
  sum = tile.shfl(sum, 0);
  sum /= hidden;

  for (int r = 0; r < rounds; r++) in_grad[r * block_threads + tid] = grad_vals[r] - sum;
}

// the block: a power of two from 128 to 1024 threads, so that the row fits REGS_PER_THREAD elements a thread
inline int block_for(int hidden) {
  int threads = 128;
  while (threads < 1024 && threads * REGS_PER_THREAD < hidden) threads *= 2;
  return threads;
}

void layer_norm_fwd(float* out, float* mean, float* var, const float* in, const float* gamma, const float* beta,
                    float eps, bool training, int rows, int hidden, cudaStream_t stream) {
  layer_norm_fwd_kernel<<<rows, block_for(hidden), 0, stream>>>(out, mean, var, in, gamma, beta, eps, training,
                                                                hidden);
}

void layer_norm_bwd_input(float* in_grad, const float* out_grad, const float* saved, const float* gamma,
                          const float* beta, const float* vars, bool invertible, int rows, int hidden,
                          cudaStream_t stream) {
  layer_norm_bwd_input_kernel<<<rows, block_for(hidden), 0, stream>>>(in_grad, out_grad, saved, gamma, beta, vars,
                                                                      invertible, hidden);
}

}  // namespace training
