// Per-group int8 quantisation of activations, as inference stacks run it before an int8 GEMM: every
// kGroupSize consecutive values of the flattened [tokens, hidden] input share one scale (their absolute
// maximum over 127), found by a warp butterfly. Written in the style of production quantisers: one thread
// per value, a shuffle reduction over the group's lanes, each lane its own int8, the group's first lane its
// statistics. The second kernel also keeps each group's sum (as q8_1-style formats do, for the zero-point
// correction of the GEMM that consumes them).
#include <cuda_runtime.h>

#include <cstdint>

namespace quant {

constexpr int kGroupSize = 32;

// The absolute maximum over an aligned group of kGroupSize lanes, in every lane of the group.
__device__ __forceinline__ float group_absmax(float v) {
#pragma unroll
  for (int offset = kGroupSize / 2; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

__global__ void group_quant_int8_kernel(int8_t* __restrict__ out, float* __restrict__ scales,
                                        const float* __restrict__ x, const int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) {
    return;
  }
  const float v = x[i];
  float amax = fabsf(v);
  amax = group_absmax(amax);
  const float inv = amax == 0.0f ? 0.0f : 127.0f / amax;
  out[i] = static_cast<int8_t>(rintf(v * inv));
  if (i % kGroupSize != 0) {
    return;
  }
  scales[i / kGroupSize] = amax / 127.0f;
}

// The same with the group's sum beside its scale; the sum is reduced in the butterfly's order, so a
// variant that reorders it must keep the bits.
__global__ void group_quant_sum_kernel(int8_t* __restrict__ out, float2* __restrict__ stats,
                                       const float* __restrict__ x, const int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) {
    return;
  }
  const float v = x[i];
  float amax = fabsf(v);
  float sum = v;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, offset, 32));
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    sum += __shfl_xor_sync(0xffffffff, sum, offset, 32);
  }
  const float d = amax / 127.0f;
  const int8_t q = amax == 0.0f ? 0 : static_cast<int8_t>(roundf(v / d));
  out[i] = q;
  if (i % kGroupSize == 0) {
    stats[i / kGroupSize] = make_float2(d, sum);
  }
}

void group_quant_int8(int8_t* out, float* scales, const float* x, int64_t n, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const unsigned int blocks = static_cast<unsigned int>((n + kThreads - 1) / kThreads);
  group_quant_int8_kernel<<<blocks, kThreads, 0, stream>>>(out, scales, x, n);
}

void group_quant_sum(int8_t* out, float2* stats, const float* x, int64_t n, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const unsigned int blocks = static_cast<unsigned int>((n + kThreads - 1) / kThreads);
  group_quant_sum_kernel<<<blocks, kThreads, 0, stream>>>(out, stats, x, n);
}

}  // namespace quant
