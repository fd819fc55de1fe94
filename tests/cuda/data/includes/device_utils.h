// The device helper alone, without torch: what a spec substitutes for torch_utils.h.
#pragma once

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffff, v, offset);
  return v;
}
