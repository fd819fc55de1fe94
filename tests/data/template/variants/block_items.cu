// One-block-per-item kernels with small blocks, as serving code writes them: a group-quantised weight dequantised
// by one warp per group, a per-token scale (absmax over the token by warp shuffles), a bias add whose rows are
// walked by a loop over the grid, and kernels whose blocks cooperate (which block_items refuses).
#include <cuda_fp16.h>
#include <stdint.h>

struct group_q8 {
  half scale;
  int8_t q[64];
};

__device__ __forceinline__ float dequant_one(const group_q8& g, int i) { return __half2float(g.scale) * g.q[i]; }

// one block of 32 threads per group of 64 values; the launch rounds the groups up to a multiple of 4
template <typename out_t>
__global__ void dequant_group_kernel(const void* __restrict__ packed, out_t* __restrict__ out, int num_groups) {
  const int64_t group = blockIdx.x;
  const int lane = threadIdx.x;
  if (group >= num_groups) {
    return;
  }
  const group_q8& g = static_cast<const group_q8*>(packed)[group];
  out_t* y = out + group * 64;
  for (int j = lane; j < 64; j += 32) {
    y[j] = static_cast<out_t>(dequant_one(g, j));
  }
}

// one warp per token: the token's absmax by butterfly shuffles, then every value scaled into int8
__global__ void token_quant_kernel(int8_t* __restrict__ out, float* __restrict__ scales, const float* __restrict__ x,
                                   int hidden) {
  const int token = blockIdx.x;
  const float* row = x + static_cast<int64_t>(token) * hidden;
  float amax = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) amax = fmaxf(amax, fabsf(row[i]));
#pragma unroll
  for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float scale = amax > 0.f ? 127.f / amax : 0.f;
  if (threadIdx.x == 0) scales[token] = amax / 127.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    out[static_cast<int64_t>(token) * hidden + i] = static_cast<int8_t>(rintf(row[i] * scale));
  }
}

// rows walked by a loop over the blocks of the grid (as many blocks as the launch gives)
__global__ void bias_rows_kernel(float* __restrict__ out, const float* __restrict__ bias, int rows, int cols) {
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      out[static_cast<int64_t>(r) * cols + c] += bias[c];
    }
  }
}

// a row's pointers moved to the row first, as row kernels often start: one warp a row, each element scaled by its
// row's factor
__global__ void moved_rows_kernel(float* __restrict__ dst, const float* __restrict__ src,
                                  const float* __restrict__ scale, int cols) {
  const int row = blockIdx.x;
  src += static_cast<int64_t>(row) * cols;
  dst += static_cast<int64_t>(row) * cols;
  const float s = scale[row];
  for (int c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = src[c] * s;
}

// a block-wide sum through shared memory and a barrier: each item gets its own copy of the warps' partials
__global__ void row_sum_kernel(float* __restrict__ out, const float* __restrict__ x, int cols) {
  __shared__ float partial[32];
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += x[blockIdx.x * cols + c];
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
  }
}

// a split-K tile of a small GEMV: the block's slice of each batch row staged in shared memory, two barriers a
// round of a loop whose count every item shares
__global__ void tile_dot_kernel(float* __restrict__ out, const float* __restrict__ w, const float* __restrict__ v,
                                int batch, int k) {
  __shared__ float tile[64];
  const int c = threadIdx.x;
  for (int b = 0; b < batch; ++b) {
    tile[threadIdx.x] = v[b * k + blockIdx.x * 64 + threadIdx.x];
    __syncthreads();
    float acc = 0.f;
    for (int j = 0; j < 64; ++j) acc += w[(blockIdx.x * 64 + j) * 64 + c] * tile[j];
    atomicAdd(&out[b * 64 + c], acc);
    __syncthreads();
  }
}

// a row staged in dynamic shared memory (the launch gives it the row's floats) and written back reversed: the threads
// read what others of their row wrote, so each item needs its own slice
__global__ void staged_reverse_kernel(float* __restrict__ out, const float* __restrict__ x, int cols) {
  extern __shared__ float staged[];
  for (int c = threadIdx.x; c < cols; c += blockDim.x) staged[c] = x[blockIdx.x * cols + c];
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[blockIdx.x * cols + c] = staged[cols - 1 - c];
}

__device__ __forceinline__ int flat_block() { return blockIdx.y * gridDim.x + blockIdx.x; }

// the item is computed by a helper that reads the block index itself
__global__ void helper_index_kernel(float* __restrict__ out, int cols) {
  const int b = flat_block();
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[b * cols + c] = 1.f;
}

// attention scores softmaxed a (token, head) row a block, grid (tokens, heads): the row scaled and staged after a slot
// per warp in dynamic shared memory, its maximum and sum over the block through those slots. row_reduce cannot put
// rows on y here itself (the grid is 2-D, the row is staged), so block_items chains onto its variant
__device__ __forceinline__ float head_warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float head_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void head_softmax_kernel(float* __restrict__ y, const float* __restrict__ x, int cols, float scale) {
  extern __shared__ float head_smem[];
  float* slots = head_smem;
  float* cache = head_smem + 32;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int64_t row = blockIdx.x + static_cast<int64_t>(blockIdx.y) * gridDim.x;
  x += row * cols;
  y += row * cols;

  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = x[c] * scale;
    cache[c] = v;
    m = fmaxf(m, v);
  }
  m = head_warp_max(m);
  if (blockDim.x > 32) {
    if (warp == 0) slots[lane] = -INFINITY;
    __syncthreads();
    if (lane == 0) slots[warp] = m;
    __syncthreads();
    m = slots[lane];
    m = head_warp_max(m);
  }

  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float e = __expf(cache[c] - m);
    cache[c] = e;
    s += e;
  }
  s = head_warp_sum(s);
  if (blockDim.x > 32) {
    __syncthreads();
    if (warp == 0) slots[lane] = 0.f;
    __syncthreads();
    if (lane == 0) slots[warp] = s;
    __syncthreads();
    s = slots[lane];
    s = head_warp_sum(s);
  }
  const float inv = 1.f / s;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[c] = cache[c] * inv;
}

void launch_all(const void* packed, half* deq, int num_groups, int8_t* q, float* scales, const float* x, int tokens,
                int hidden, float* out, const float* bias, int rows, int cols, cudaStream_t stream) {
  dequant_group_kernel<half><<<(num_groups + 3) / 4 * 4, 32, 0, stream>>>(packed, deq, num_groups);
  token_quant_kernel<<<tokens, 32, 0, stream>>>(q, scales, x, hidden);
  bias_rows_kernel<<<rows < 1024 ? rows : 1024, 128, 0, stream>>>(out, bias, rows, cols);
  moved_rows_kernel<<<rows, 32, 0, stream>>>(out, x, bias, cols);
  row_sum_kernel<<<rows, 256, 0, stream>>>(out, x, cols);
  tile_dot_kernel<<<hidden / 64, 64, 0, stream>>>(out, x, bias, tokens, hidden);
  helper_index_kernel<<<dim3(rows, 2), 128, 0, stream>>>(out, cols);
  staged_reverse_kernel<<<rows, 128, cols * sizeof(float), stream>>>(out, x, cols);
  head_softmax_kernel<<<dim3(tokens, 32), 128, (cols + 32) * sizeof(float), stream>>>(out, x, cols, 0.125f);
}
