// Test kernels for row_cache: rows read in several passes counted over the same rounds.
#include <cuda_runtime.h>
#include <math_constants.h>

namespace rowcache {

template <typename T>
__device__ __forceinline__ T ceil_div(const T a, const T b) { return (a + b - 1) / b; }

// four floats moved as one 16-byte access
struct Pack4 {
  float v[4];
  __device__ __forceinline__ void fill(const float x) {
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = x;
  }
  __device__ __forceinline__ void load(const float* p) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
  }
  __device__ __forceinline__ void store(float* p) const {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  }
  __device__ __forceinline__ float& operator[](const int k) { return v[k]; }
};

template <int kThreads>
__device__ float block_reduce(float x, float* scratch, const bool is_max) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float y = __shfl_xor_sync(0xffffffffu, x, o);
    x = is_max ? fmaxf(x, y) : x + y;
  }
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = x;
  __syncthreads();
  float r = is_max ? -CUDART_INF_F : 0.f;
  for (int w = 0; w < kThreads / 32; ++w) r = is_max ? fmaxf(r, scratch[w]) : r + scratch[w];
  __syncthreads();
  return r;
}

// A three-pass softmax (maximum, sum of exponentials, normalise) over rows of `cols` floats (a multiple of 4), the
// pointers not __restrict__: the output may be the input, element for element.
template <int kThreads>
__global__ void three_pass_softmax_kernel(float* out, const float* in, const int cols) {
  __shared__ float scratch[kThreads / 32];
  const float* x = in + static_cast<size_t>(blockIdx.x) * cols;
  float* y = out + static_cast<size_t>(blockIdx.x) * cols;
  Pack4 v;
  float m = -CUDART_INF_F;
  for (int r = 0; r < ceil_div(cols, 4 * kThreads); ++r) {
    v.fill(-CUDART_INF_F);
    const int at = (r * kThreads + threadIdx.x) * 4;
    if (at < cols) v.load(x + at);
#pragma unroll
    for (int k = 0; k < 4; ++k) m = fmaxf(m, v[k]);
  }
  m = block_reduce<kThreads>(m, scratch, true);
  float s = 0.f;
  for (int r = 0; r < ceil_div(cols, 4 * kThreads); ++r) {
    const int at = (r * kThreads + threadIdx.x) * 4;
    if (at < cols) {
      v.load(x + at);
#pragma unroll
      for (int k = 0; k < 4; ++k) s += __expf(v[k] - m);
    }
  }
  const float inv = 1.f / block_reduce<kThreads>(s, scratch, false);
  for (int r = 0; r < ceil_div(cols, 4 * kThreads); ++r) {
    const int at = (r * kThreads + threadIdx.x) * 4;
    if (at < cols) {
      v.load(x + at);
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = __expf(v[k] - m) * inv;
      v.store(y + at);
    }
  }
}

// An L2 normalisation of rows, element by element.
template <int kThreads>
__global__ void l2_normalize_kernel(float* __restrict__ y, const float* __restrict__ x, const int cols, const float eps) {
  __shared__ float scratch[kThreads / 32];
  const size_t base = static_cast<size_t>(blockIdx.x) * cols;
  const int rounds = (cols + kThreads - 1) / kThreads;
  float ss = 0.f;
  for (int r = 0; r < rounds; ++r) {
    const int c = r * kThreads + threadIdx.x;
    if (c < cols) {
      const float v = x[base + c];
      ss += v * v;
    }
  }
  const float inv = rsqrtf(block_reduce<kThreads>(ss, scratch, false) + eps);
  for (int r = 0; r < rounds; ++r) {
    const int c = r * kThreads + threadIdx.x;
    if (c < cols) {
      const float v = x[base + c];
      y[base + c] = v * inv;
    }
  }
}

// The first pass walks the row's rounds only until the block's running mass of |x| passes `mass` (a sampler's
// stop, the same for every thread of the block); the second scales every element, zeroing those past the stop.
template <int kThreads>
__global__ void prefix_mass_kernel(float* out, const float* in, const int cols, const float mass) {
  __shared__ float scratch[kThreads / 32];
  const float* x = in + static_cast<size_t>(blockIdx.x) * cols;
  float* y = out + static_cast<size_t>(blockIdx.x) * cols;
  float total = 0.f;
  int used = 0;
  for (int r = 0; r < ceil_div(cols, kThreads); ++r) {
    const int c = r * kThreads + threadIdx.x;
    float v = 0.f;
    if (c < cols) v = x[c];
    total += block_reduce<kThreads>(fabsf(v), scratch, false);
    used = r + 1;
    if (total > mass) break;
  }
  for (int r = 0; r < ceil_div(cols, kThreads); ++r) {
    const int c = r * kThreads + threadIdx.x;
    if (c < cols) {
      const float v = x[c];
      y[c] = r < used ? v / total : 0.f;
    }
  }
}

}  // namespace rowcache
