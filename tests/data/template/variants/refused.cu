// Row kernels the row_reduce transform must refuse, one reason each.

// rows not contiguous: a column of a row-major matrix
__global__ void strided_kernel(float* out, const float* in, int n, int stride) {
  __shared__ float total;
  float sum = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) sum += in[blockIdx.x + j * stride];
  sum += __shfl_xor_sync(0xffffffffu, sum, 16);
  if (threadIdx.x == 0) total = sum;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = total;
}

// atomics: the sum goes to global memory
__global__ void atomic_kernel(float* out, const float* in, int n) {
  float sum = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) sum += in[blockIdx.x * n + j];
  atomicAdd(&out[blockIdx.x], sum);
}

// data-dependent control flow across elements: stops at the first negative element
__global__ void early_exit_kernel(float* out, const float* in, int n) {
  __shared__ float total;
  float sum = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    if (in[blockIdx.x * n + j] < 0.f) break;
    sum += in[blockIdx.x * n + j];
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 16);
  if (threadIdx.x == 0) total = sum;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = in[blockIdx.x * n + j] / total;
}

// a reduction it cannot identify: only thread 0 sums what the others left in a global scratch row
__global__ void unknown_reduce_kernel(float* out, float* scratch, const float* in, int n) {
  __shared__ float total;
  float sum = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) sum += in[blockIdx.x * n + j];
  if (threadIdx.x == 0) total = sum * 2.f;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = in[blockIdx.x * n + j] / total;
}

// two sums reduced together as one pair by a custom operator: the parts cannot be kept apart
struct Pair {
  float s, q;
};
struct PairSum {
  __device__ Pair operator()(Pair a, Pair b) const { return {a.s + b.s, a.q + b.q}; }
};
__global__ void paired_kernel(float* out, const float* in, int n) {
  typedef cub::BlockReduce<Pair, 256> R;
  __shared__ typename R::TempStorage tmp;
  __shared__ Pair total;
  Pair acc = {0.f, 0.f};
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float v = in[blockIdx.x * n + j];
    acc.s += v;
    acc.q += v * v;
  }
  const Pair t = R(tmp).Reduce(acc, PairSum());
  if (threadIdx.x == 0) total = t;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = total.s / total.q;
}

// running max read inside the loop (online softmax): carried from element to element
__global__ void online_kernel(float* out, const float* in, int n) {
  __shared__ float total;
  float m = -1e30f;
  float s = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float v = in[blockIdx.x * n + j];
    const float next = fmaxf(m, v);
    s = s * __expf(m - next) + __expf(v - next);
    m = next;
  }
  s += __shfl_xor_sync(0xffffffffu, s, 16);
  if (threadIdx.x == 0) total = s;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = total;
}

// the row held in registers by a count of strides with neither a bounds check inside nor a tail after it: the last,
// partial round of a row longer than a multiple of the block is left undone
__global__ void counted_rows_kernel(float* out, const float* in, int n) {
  __shared__ float total;
  const int id = threadIdx.x;
  const int iterations = n / blockDim.x;
  float vals[8];
  float s = 0.f;
  for (int i = 0; i < iterations; i++) {
    vals[i] = in[blockIdx.x * n + i * blockDim.x + id];
    s += vals[i];
  }
  s += __shfl_xor_sync(0xffffffffu, s, 16);
  if (id == 0) total = s;
  __syncthreads();
  for (int i = 0; i < iterations; i++) out[blockIdx.x * n + i * blockDim.x + id] = vals[i] / total;
}

// the warps' sums meet in shared memory only where the row is longer than one tile of kTile threads: shorter rows'
// totals are each tile's own (rows several to a block), which a block-wide all-reduce would mix
template <int kTile>
__global__ void skipped_stage_kernel(float* out, const float* in, int n) {
  __shared__ float warp_sums[32];
  const int lane = threadIdx.x & 31;
  const int warps = blockDim.x >> 5;
  float s = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) s += in[blockIdx.x * n + j];
  for (int o = 1; o < kTile; o *= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (n > kTile) {
    if (lane == 0) warp_sums[threadIdx.x >> 5] = s;
    __syncthreads();
    s = lane < warps ? warp_sums[lane] : 0.f;
    for (int o = 1; o < warps; o *= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  }
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = in[blockIdx.x * n + j] / s;
}

// each warp's partial is one tile's of kTile lanes (a width the kernel cannot show to be the warp's): the original's
// total leaves the other tiles' values out
template <int kTile>
__global__ void tile_partial_kernel(float* out, const float* in, int n) {
  __shared__ float warp_sums[32];
  const int lane = threadIdx.x & 31;
  float s = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) s += in[blockIdx.x * n + j];
  for (int o = 1; o < kTile; o *= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) warp_sums[threadIdx.x >> 5] = s;
  __syncthreads();
  s = lane < (blockDim.x >> 5) ? warp_sums[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = in[blockIdx.x * n + j] / s;
}

// shuffled down by 8, 4, 2 and 1 only: lane 0 holds half its warp's sum
__global__ void half_warp_partial_kernel(float* out, const float* in, int n) {
  __shared__ float warp_sums[32];
  const int lane = threadIdx.x & 31;
  float s = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) s += in[blockIdx.x * n + j];
  for (int o = 8; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if (lane == 0) warp_sums[threadIdx.x >> 5] = s;
  __syncthreads();
  s = lane < (blockDim.x >> 5) ? warp_sums[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = in[blockIdx.x * n + j] / s;
}

// rows of `n` elements, `group` threads each (at least n), several to a block: the thread's place in its row is its
// index modulo a count the arguments choose
__global__ void group_rows_kernel(float* out, const float* in, int n, int group) {
  __shared__ float total[32];
  const int lane = threadIdx.x % group;
  const int base = (blockIdx.x * (blockDim.x / group) + threadIdx.x / group) * n;
  float s = 0.f;
  for (int i = 0; i < 1; i++) {
    const int j = i * blockDim.x + lane;
    if (j < n) s += in[base + j];
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) total[threadIdx.x / 32] = s;
  __syncthreads();
  if (lane < n) out[base + lane] = in[base + lane] / total[threadIdx.x / 32];
}

// shuffled down over the whole warp, but stored from lane 31: only lane 0 holds the warp's total
__global__ void down_last_lane_kernel(float* out, const float* in, int n) {
  __shared__ float warp_sums[32];
  const int lane = threadIdx.x & 31;
  float s = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) s += in[blockIdx.x * n + j];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if (lane == 31) warp_sums[threadIdx.x >> 5] = s;
  __syncthreads();
  s = lane < (blockDim.x >> 5) ? warp_sums[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  for (int j = threadIdx.x; j < n; j += blockDim.x) out[blockIdx.x * n + j] = in[blockIdx.x * n + j] / s;
}

// a store at an index computed from the element that reads back what it stores: pairs of elements summed into one
// output in the thread's order, which another split of the row across threads would change
__global__ void pair_sums_kernel(float* out, const float* in, int n) {
  typedef cub::BlockReduce<float, 256> R;
  __shared__ typename R::TempStorage tmp;
  __shared__ float total;
  float s = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) s += in[blockIdx.x * n + j];
  const float t = R(tmp).Reduce(s, cub::Sum());
  if (threadIdx.x == 0) total = t;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const int half = (blockIdx.x * n + j) / 2;
    out[half] = out[half] + in[blockIdx.x * n + j] / total;
  }
}
