// LayerNorm over rows of __half pairs, in the style of training kernels that keep a thread's share of the row as
// float2 in a local array: the row read through __half2 pointers moved to the row, each pair's parts updated in
// place, gamma read through a __half2 pointer declared between the passes; the body is compiled only where __half2
// arithmetic exists. Launch: one block per row, block_threads * REGS >= pairs.
#include <cooperative_groups.h>
#include <cuda_fp16.h>

namespace cg = cooperative_groups;

#define REGS 8

__global__ void half2_layer_norm_kernel(__half* out, const __half* in, const __half* gamma, float eps, int pairs) {
#if __CUDA_ARCH__ >= 530
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
  const int block_threads = blockDim.x;
  int rounds = pairs / block_threads;
  const int tid = threadIdx.x;
  const int warps = block_threads / 32;
  __shared__ float partials[32];
  float2 vals[REGS];

  const __half2* in2 = reinterpret_cast<const __half2*>(in);
  __half2* out2 = reinterpret_cast<__half2*>(out);
  in2 += blockIdx.x * pairs;
  out2 += blockIdx.x * pairs;
  const int last = rounds * block_threads + tid;

  float sum = 0.f;
  for (int r = 0; r < rounds; r++) {
    vals[r] = __half22float2(in2[r * block_threads + tid]);
    sum += vals[r].x + vals[r].y;
  }
  if (last < pairs) {
    vals[rounds] = __half22float2(in2[last]);
    sum += vals[rounds].x + vals[rounds].y;
    rounds++;
  }
  for (int i = 1; i < 32; i *= 2) sum += tile.shfl_down(sum, i);
  if (tile.thread_rank() == 0) partials[tid / 32] = sum;
  block.sync();
  if (tile.thread_rank() < warps) sum = partials[tile.thread_rank()];
  block.sync();
  for (int i = 1; i < warps; i *= 2) sum += tile.shfl_down(sum, i);
  sum = tile.shfl(sum, 0);
  const float mean = sum / (2 * pairs);

  float sq = 0.f;
  for (int r = 0; r < rounds; r++) {
    vals[r].x -= mean;
    vals[r].y -= mean;
    sq += vals[r].x * vals[r].x + vals[r].y * vals[r].y;
  }
  for (int i = 1; i < 32; i *= 2) sq += tile.shfl_down(sq, i);
  if (tile.thread_rank() == 0) partials[tid / 32] = sq;
  block.sync();
  if (tile.thread_rank() < warps) sq = partials[tile.thread_rank()];
  block.sync();
  for (int i = 1; i < warps; i *= 2) sq += tile.shfl_down(sq, i);
  sq = tile.shfl(sq, 0);
  const float rstd = rsqrtf(sq / (2 * pairs) + eps);
  const __half2* gamma2 = reinterpret_cast<const __half2*>(gamma);

  for (int r = 0; r < rounds; r++) {
    out2[r * block_threads + tid] = __floats2half2_rn(vals[r].x * rstd, vals[r].y * rstd) * gamma2[r * block_threads + tid];
  }
#endif
}

void launch(__half* out, const __half* in, const __half* gamma, int rows, int pairs, cudaStream_t stream) {
  half2_layer_norm_kernel<<<rows, 256, 0, stream>>>(out, in, gamma, 1e-5f, pairs);
}
