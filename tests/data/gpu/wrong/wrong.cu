// Planted wrong templates, one per class of failure the checks must name, and one right template.
// In each planted kernel MODE 0 (the original, the default) is right and MODE 1 is wrong; the spec's
// sizes are round (multiples of 1024), so several bugs show only at the derived ragged sizes.
#include <cuda_runtime.h>

constexpr int kTile = 256;  // threads per block of every planted kernel

// tail skipped when n % 4 != 0: a float4 path over n / 4 packs, then (MODE 0 only) the scalar tail.
template <int MODE>
__global__ void tail_kernel(float* __restrict__ out, const float* __restrict__ x, const int n) {
  const int packs = n / 4;
  for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < packs; p += gridDim.x * blockDim.x) {
    const float4 v = reinterpret_cast<const float4*>(x)[p];
    reinterpret_cast<float4*>(out)[p] = make_float4(2.f * v.x, 2.f * v.y, 2.f * v.z, 2.f * v.w);
  }
  if (MODE == 0 && blockIdx.x == 0) {
    for (int i = packs * 4 + threadIdx.x; i < n; i += blockDim.x) out[i] = 2.f * x[i];
  }
}

// unwritten in-place output: residual += x, out = 2 * residual; MODE 1 never stores the residual back.
template <int MODE>
__global__ void inplace_kernel(float* __restrict__ out, float* __restrict__ residual, const float* __restrict__ x,
                               const int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float r = residual[i] + x[i];
  if (MODE == 0) residual[i] = r;
  out[i] = 2.f * r;
}

// missing barrier: each block reverses its tile through shared memory; MODE 1 reads before all have written.
template <int MODE>
__global__ void barrier_kernel(float* __restrict__ out, const float* __restrict__ x, const int n) {
  __shared__ float tile[kTile];
  const int i = blockIdx.x * kTile + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] : 0.f;
  if (MODE == 0) __syncthreads();
  if (i < n) out[i] = 2.f * tile[kTile - 1 - threadIdx.x];
}

// accumulate instead of store: MODE 1 adds into the (poisoned) output.
template <int MODE>
__global__ void accumulate_kernel(float* __restrict__ out, const float* __restrict__ x, const int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (MODE == 0) {
    out[i] = 2.f * x[i];
  } else {
    out[i] += 2.f * x[i];
  }
}

// out-of-bounds write: MODE 1's bound check is off by three, so the last block writes into the padding.
// Every element of `out` is still right.
template <int MODE>
__global__ void bounds_kernel(float* __restrict__ out, const float* __restrict__ x, const int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n + (MODE == 0 ? 0 : 3)) return;
  out[i] = i < n ? 2.f * x[i] : 0.f;
}

// vector path right only for round sizes: MODE 1 moves float4s in blocks of 1,024 elements and launches
// n / 1024 blocks (see the spec's grid), which is every element only when n is a multiple of 1,024.
template <int MODE>
__global__ void vector_kernel(float* __restrict__ out, const float* __restrict__ x, const int n) {
  if (MODE == 0) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.f * x[i];
  } else {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    const float4 v = reinterpret_cast<const float4*>(x)[p];
    reinterpret_cast<float4*>(out)[p] = make_float4(2.f * v.x, 2.f * v.y, 2.f * v.z, 2.f * v.w);
  }
}

// write into an input: MODE 1 uses its input as scratch space after reading it.
template <int MODE>
__global__ void input_kernel(float* __restrict__ out, float* __restrict__ x, const int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  out[i] = 2.f * v;
  if (MODE == 1) x[i] = 0.f;
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// a race that shows only sometimes: in MODE 1 the first thread of every 16th block also stores a stale
// value (x instead of 2x) into the last element of the block before it. The right store, after a wait
// of a few hundred nanoseconds read off the clock, usually lands last; now and then it does not.
template <int MODE>
__global__ void race_kernel(float* __restrict__ out, const float* __restrict__ x, const int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (MODE == 1 && threadIdx.x == 0 && blockIdx.x % 16 == 0 && blockIdx.x > 0) {
    out[i - 1] = x[i - 1];
  }
  if (threadIdx.x == blockDim.x - 1) {
    const unsigned long long start = global_ns();
    const unsigned long long wait = start % 512;
    while (global_ns() - start < wait) {
    }
  }
  out[i] = 2.f * x[i];
}

// the right template: a gated activation with a VEC-wide path and a scalar tail, right for every n.
template <int VEC>
__global__ void right_kernel(float* __restrict__ out, const float* __restrict__ x, const int n) {
  const int stride = gridDim.x * blockDim.x;
  const int first = blockIdx.x * blockDim.x + threadIdx.x;
  const int vectors = n / VEC;
  for (int p = first; p < vectors; p += stride) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float v = x[p * VEC + j];
      out[p * VEC + j] = v / (1.f + __expf(-v));
    }
  }
  for (int i = vectors * VEC + first; i < n; i += stride) {
    const float v = x[i];
    out[i] = v / (1.f + __expf(-v));
  }
}
