// An fp16 RMSNorm whose row stays in registers across the block's rounds: one block of THREADS threads per row,
// each thread one value per round, ROUNDS rounds as the host's picker chooses for the row length. Written the way
// hand-tuned inference code often is: the thread's column rebuilt from its warp and lane, a round past the row's end
// leaving the loop (`break`, and `return` in the last loop), the sum of squares accumulated with fmaf, a two-level
// reduction whose second level reads one partial per lane, and a launch through a function pointer on a grid and
// block set member by member.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define WARP 32
#define WARPS 32
#define THREADS (WARPS * WARP)

template <int ROUNDS>
__global__ void rounds_rms_norm_kernel(const __half* __restrict__ in, const __half* __restrict__ gamma,
                                       __half* __restrict__ out, const float eps, const int cols) {
  const int warp = threadIdx.x / WARP;
  const int lane = threadIdx.x % WARP;
  const __half* src = in + (size_t)blockIdx.x * cols;
  __half* dst = out + (size_t)blockIdx.x * cols;

  float held[ROUNDS];
  float squares = 0.0f;
#pragma unroll
  for (int r = 0; r < ROUNDS; ++r) {
    const int col = warp * WARP + lane + r * THREADS;
    if (col >= cols) break;
    held[r] = __half2float(src[col]);
    squares = fmaf(held[r], held[r], squares);
  }

  // each warp's total, then every warp sums the WARPS partials (THREADS is WARP * WARP: one partial per lane)
  __shared__ float partial[WARPS];
  for (int o = WARP / 2; o > 0; o >>= 1) squares += __shfl_xor_sync(0xffffffffu, squares, o);
  if (lane == 0) partial[warp] = squares;
  __syncthreads();
  squares = partial[lane];
  for (int o = WARP / 2; o > 0; o >>= 1) squares += __shfl_xor_sync(0xffffffffu, squares, o);

  const float scale = rsqrtf(squares / cols + eps);
#pragma unroll
  for (int r = 0; r < ROUNDS; ++r) {
    const int col = warp * WARP + lane + r * THREADS;
    if (col >= cols) return;
    dst[col] = __float2half_rn(held[r] * scale * __half2float(gamma[col]));
  }
}

typedef void (*rounds_rms_norm_fn)(const __half*, const __half*, __half*, float, int);

// the instance whose rounds cover a row of `rounds` * THREADS values; nullptr past the largest
static rounds_rms_norm_fn pick_rounds(const int rounds) {
  switch (rounds) {
    case 1: return rounds_rms_norm_kernel<1>;
    case 2: return rounds_rms_norm_kernel<2>;
    case 4: return rounds_rms_norm_kernel<4>;
    case 8: return rounds_rms_norm_kernel<8>;
    default: return nullptr;
  }
}

cudaError_t rounds_rms_norm(const __half* in, const __half* gamma, __half* out, const float eps, const int rows,
                            const int cols, cudaStream_t stream) {
  int rounds = 1;
  while (rounds * THREADS < cols) rounds *= 2;
  rounds_rms_norm_fn kernel = pick_rounds(rounds);
  if (kernel == nullptr) return cudaErrorInvalidValue;
  dim3 grid, block;
  grid.x = rows;
  block.x = THREADS;
  kernel<<<grid, block, 0, stream>>>(in, gamma, out, eps, cols);
  return cudaGetLastError();
}
