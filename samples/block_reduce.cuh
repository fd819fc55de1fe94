// Block reductions shared by the three-pass norm samples, in the style of transformer inference code bases that
// keep their warp and block reductions in one project header.
#pragma once

namespace serving {
namespace kernels {

#define FULL_MASK 0xffffffff
// added to the variance before its reciprocal square root
const float kNormEpsilon = 1e-6f;

// every lane of the warp gets the sum of the warp's values
template <typename T>
__inline__ __device__ T warpReduceSum(T val) {
#pragma unroll
  for (int offset = (32 >> 1); offset > 0; offset >>= 1) val += __shfl_xor_sync(FULL_MASK, val, offset, 32);
  return val;
}

// every thread of the block gets the sum of the block's values (blocks of whole warps, at most 1024 threads)
template <typename T>
__inline__ __device__ T blockReduceSum(T val) {
  static __shared__ T partials[32];
  int lane = threadIdx.x & 0x1f;
  int warp = threadIdx.x >> 5;
  val = warpReduceSum<T>(val);
  if (lane == 0) partials[warp] = val;
  __syncthreads();
  val = (threadIdx.x < (blockDim.x >> 5)) ? partials[lane] : (T)0.0f;
  val = warpReduceSum<T>(val);
  return val;
}

}  // namespace kernels
}  // namespace serving
