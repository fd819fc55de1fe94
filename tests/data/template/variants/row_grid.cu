// Row kernels whose grid is not a plain one block per row along x: a padded grid whose spare blocks return before
// the reduction, (rows, heads, batch) and (rows, channels) grids whose row's place is flattened from blockIdx and
// gridDim, as locals or by moving the pointer parameters to the row.
#include <cub/cub.cuh>
#include <cuda_fp16.h>

// the launch rounds the rows up to a multiple of 8 blocks: the spare blocks leave at once
template <int BLOCK>
__global__ void padded_rms_norm_kernel(float* __restrict__ out, const float* __restrict__ in,
                                       const float* __restrict__ weight, int num_rows, int hidden, float eps) {
  using BlockReduce = cub::BlockReduce<float, BLOCK>;
  __shared__ typename BlockReduce::TempStorage temp;
  __shared__ float s_scale;
  const int row = blockIdx.x;
  if (row >= num_rows) return;
  const long long offset = static_cast<long long>(row) * hidden;
  float ss = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = in[offset + i];
    ss += v * v;
  }
  ss = BlockReduce(temp).Sum(ss);
  if (threadIdx.x == 0) s_scale = rsqrtf(ss / hidden + eps);
  __syncthreads();
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[offset + i] = in[offset + i] * s_scale * weight[i];
}

// one block per (row, head, batch): the row's place in the output is flattened from the 3-D grid
__global__ void head_softmax_kernel(float* __restrict__ out, const float* __restrict__ scores, int cols,
                                    long long head_stride, long long batch_stride) {
  __shared__ float warp_max[32];
  __shared__ float warp_sum[32];
  const int rows = gridDim.x;
  const int heads = gridDim.y;
  const long long src = blockIdx.z * batch_stride + blockIdx.y * head_stride + static_cast<long long>(blockIdx.x) * cols;
  const long long dst = ((static_cast<long long>(blockIdx.z) * heads + blockIdx.y) * rows + blockIdx.x) * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, scores[src + c]);
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  float row_max = warp_max[0];
  for (int w = 1; w < blockDim.x / 32; ++w) row_max = fmaxf(row_max, warp_max[w]);
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(scores[src + c] - row_max);
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) warp_sum[threadIdx.x / 32] = s;
  __syncthreads();
  float total = warp_sum[0];
  for (int w = 1; w < blockDim.x / 32; ++w) total += warp_sum[w];
  const float inv = 1.f / total;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[dst + c] = __expf(scores[src + c] - row_max) * inv;
}

// strided (row, channel) input moved to its row before the loops; a contiguous output
__global__ void strided_scale_kernel(__half* __restrict__ out, const __half* __restrict__ in, int cols,
                                     long long row_stride, long long channel_stride) {
  __shared__ float partial[32];
  in += blockIdx.y * channel_stride + blockIdx.x * row_stride;
  out += (static_cast<long long>(blockIdx.y) * gridDim.x + blockIdx.x) * cols;
  float amax = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) amax = fmaxf(amax, fabsf(__half2float(in[c])));
  for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = amax;
  __syncthreads();
  float peak = partial[0];
  for (int w = 1; w < blockDim.x / 32; ++w) peak = fmaxf(peak, partial[w]);
  const float inv = peak > 0.f ? 1.f / peak : 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __float2half(__half2float(in[c]) * inv);
}

// a dim3(32, warps) block per row: threadIdx.y picks the warp, the row's threads numbered y-major
template <typename T>
__global__ void warp_grid_rms_norm_kernel(T* __restrict__ out, const T* __restrict__ in, const T* __restrict__ weight,
                                          unsigned int hidden, float eps) {
  __shared__ float per_warp[32];
  const unsigned int lane = threadIdx.x;
  const unsigned int warp = threadIdx.y;
  const unsigned int tid = warp * blockDim.x + lane;
  const T* x = in + static_cast<size_t>(blockIdx.x) * hidden;
  T* y = out + static_cast<size_t>(blockIdx.x) * hidden;
  float ss = 0.f;
  for (unsigned int i = threadIdx.y * blockDim.x + threadIdx.x; i < hidden; i += blockDim.x * blockDim.y) {
    const float v = static_cast<float>(x[i]);
    ss += v * v;
  }
  for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) per_warp[warp] = ss;
  __syncthreads();
  if (warp == 0) {
    ss = lane < blockDim.y ? per_warp[lane] : 0.f;
    for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) per_warp[0] = ss;
  }
  __syncthreads();
  const float scale = rsqrtf(per_warp[0] / hidden + eps);
  for (unsigned int i = tid; i < hidden; i += blockDim.x * blockDim.y) {
    y[i] = static_cast<T>(static_cast<float>(x[i]) * scale * static_cast<float>(weight[i]));
  }
}

// rows along y within a block, each row's threads along x: a row index from threadIdx.y the rewrite cannot move
__global__ void rows_along_y_kernel(float* out, const float* in, int n) {
  __shared__ float total[8];
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  float sum = 0.f;
  for (int j = tid; j < n; j += blockDim.x * blockDim.y) sum += in[row * n + j];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x == 0) total[threadIdx.y] = sum;
  __syncthreads();
  for (int j = tid; j < n; j += blockDim.x * blockDim.y) out[row * n + j] = in[row * n + j] / total[0];
}

// each thread moves its own pointer: not a row's place, the same for every thread
__global__ void thread_rebase_kernel(float* out, const float* in, int n) {
  __shared__ float total;
  in += threadIdx.x % 2;
  float sum = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) sum += in[blockIdx.x * n + j];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x == 0) total = sum;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = in[blockIdx.x * n + j] / total;
}

// the threads of one block disagree on leaving: not block-uniform
__global__ void thread_exit_kernel(float* out, const float* in, int n) {
  __shared__ float total;
  if (threadIdx.x >= n) return;
  float sum = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) sum += in[blockIdx.x * n + j];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x == 0) total = sum;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = in[blockIdx.x * n + j] / total;
}

// a per-row scale read past the early return: the rows that leave must not read it
__global__ void scaled_exit_kernel(float* out, const float* in, const float* row_scale, int rows, int n) {
  __shared__ float total;
  if (blockIdx.x >= rows) return;
  const float scale = row_scale[blockIdx.x];
  float sum = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) sum += in[blockIdx.x * n + j];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x == 0) total = sum;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = in[blockIdx.x * n + j] * scale / total;
}

// the exit reads memory (a per-row length): the rewrite does not prove it the same for every thread
__global__ void ragged_exit_kernel(float* out, const float* in, const int* lengths, int n) {
  __shared__ float total;
  if (lengths[blockIdx.x] == 0) return;
  float sum = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) sum += in[blockIdx.x * n + j];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x == 0) total = sum;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = in[blockIdx.x * n + j] / total;
}

// rows over a persistent grid that stop at the first empty one: leaving there ends every later row too
__global__ void persistent_exit_kernel(float* out, const float* in, int rows, int n) {
  __shared__ float total;
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    if (n == 0) return;
    float sum = 0.f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) sum += in[r * n + j];
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (threadIdx.x == 0) total = sum;
    __syncthreads();
    for (int j = threadIdx.x; j < n; j += blockDim.x) out[r * n + j] = in[r * n + j] / total;
  }
}

// the spare blocks of a padded grid skip the whole row: the early return written as a guard around the rest
__global__ void guarded_softmax_kernel(float* __restrict__ out, const float* __restrict__ in, int rows, int cols) {
  __shared__ float red[32];
  const int row = blockIdx.x;
  if (row < rows) {
    const float* x = in + static_cast<long long>(row) * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[c]);
    for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
    __syncthreads();
    float top = red[0];
    for (int w = 1; w < blockDim.x / 32; ++w) top = fmaxf(top, red[w]);
    __syncthreads();
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(x[c] - top);
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = s;
    __syncthreads();
    float total = red[0];
    for (int w = 1; w < blockDim.x / 32; ++w) total += red[w];
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[static_cast<long long>(row) * cols + c] = __expf(x[c] - top) / total;
  }
}

// an optional gate broadcast over rows and columns, moved to its row only when the kernel is built with one (a
// compile-time branch); its columns repeat every gate_cols
template <bool kGated>
__global__ void gated_rms_norm_kernel(float* __restrict__ out, const float* __restrict__ in,
                                      const float* __restrict__ gate, int hidden, int gate_rows, int gate_cols,
                                      float eps) {
  __shared__ float partial[32];
  in += static_cast<long long>(blockIdx.x) * hidden;
  out += static_cast<long long>(blockIdx.x) * hidden;
  if constexpr (kGated) {
    const int gate_row = blockIdx.x % gate_rows;
    gate += static_cast<long long>(gate_row) * gate_cols;
  }
  float ss = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) ss += in[i] * in[i];
  for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = partial[0];
  for (int w = 1; w < blockDim.x / 32; ++w) total += partial[w];
  const float scale = rsqrtf(total / hidden + eps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    if constexpr (kGated) {
      const int g = i % gate_cols;
      out[i] = in[i] * scale * gate[g];
    } else {
      out[i] = in[i] * scale;
    }
  }
}

// a move under a condition on the thread (through a local): the threads of a row disagree on it
__global__ void thread_gated_kernel(float* out, const float* in, int n) {
  __shared__ float total;
  const int lane = threadIdx.x % 32;
  if (lane < 16) {
    in += n;
  }
  float sum = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) sum += in[blockIdx.x * n + j];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x == 0) total = sum;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = in[blockIdx.x * n + j] / total;
}

// a move under a condition read from memory: not known to be the same for every thread
__global__ void flagged_rebase_kernel(float* out, const float* in, const int* skip, int n) {
  __shared__ float total;
  if (skip[0]) {
    in += n;
  }
  float sum = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) sum += in[blockIdx.x * n + j];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x == 0) total = sum;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = in[blockIdx.x * n + j] / total;
}

// a gate read only where it is given: packs of it loaded for every element would read through a null pointer
__global__ void optional_gate_kernel(float* out, const float* in, const float* gate, int n) {
  __shared__ float total;
  float sum = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) sum += in[blockIdx.x * n + j];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x == 0) total = sum;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float v = in[blockIdx.x * n + j] / total;
    out[blockIdx.x * n + j] = gate != nullptr ? v * gate[blockIdx.x * n + j] : v;
  }
}

// centres the first part of each pair of its row in place: a write of part of an element
__global__ void centre_x_kernel(float2* xy, int n) {
  __shared__ float total;
  float sum = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) sum += xy[blockIdx.x * n + j].x;
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x == 0) total = sum;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) xy[blockIdx.x * n + j].x -= total / n;
}

// scales its row in place only where asked: the read is on the condition, and so is the write
__global__ void optional_scale_kernel(float* x, const float* scale, int n) {
  __shared__ float total;
  float sum = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) sum += x[blockIdx.x * n + j];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x == 0) total = sum;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    if (scale != nullptr) x[blockIdx.x * n + j] = x[blockIdx.x * n + j] * scale[j] / total;
  }
}

// the kernels above that reduce within a warp only run a warp per row: their rows are one warp's threads
void launch_warp_rows(float* out, const float* in, const float* scale, const float* gate, const int* lengths,
                      const int* skip, float2* xy, int rows, int n) {
  thread_rebase_kernel<<<rows, 32>>>(out, in, n);
  thread_exit_kernel<<<rows, 32>>>(out, in, n);
  scaled_exit_kernel<<<rows, 32>>>(out, in, scale, rows, n);
  ragged_exit_kernel<<<rows, 32>>>(out, in, lengths, n);
  persistent_exit_kernel<<<rows / 4, 32>>>(out, in, rows, n);
  thread_gated_kernel<<<rows, 32>>>(out, in, n);
  flagged_rebase_kernel<<<rows, 32>>>(out, in, skip, n);
  optional_gate_kernel<<<rows, 32>>>(out, in, gate, n);
  centre_x_kernel<<<rows, 32>>>(xy, n);
  optional_scale_kernel<<<rows, 32>>>(out, scale, n);
}

// thread 0's own sum left in shared memory for the block: a broadcast of one thread's value, not the row's total
__global__ void broadcast_sum_kernel(float* out, const float* in, int n) {
  __shared__ float first[1];
  float sum = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) sum += in[blockIdx.x * n + j];
  if (threadIdx.x == 0) first[0] = sum;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = in[blockIdx.x * n + j] / first[0];
}
