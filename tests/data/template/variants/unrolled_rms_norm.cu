// An RMSNorm whose block reduction is a helper with its warp shuffles written out one by one (no loop), as
// TensorRT-LLM-style code writes it: the helper holds a shared array and a barrier, so the canonical form writes it
// out in the kernel and row_reduce sees the reduction it would otherwise take for an opaque call.
#include <cstdint>

__device__ __forceinline__ float unrolled_warp_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 16);
  v += __shfl_xor_sync(0xffffffffu, v, 8);
  v += __shfl_xor_sync(0xffffffffu, v, 4);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v;
}

__device__ __forceinline__ float unrolled_block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  v = unrolled_warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < blockDim.x / 32 ? partial[lane] : 0.f;
  v = unrolled_warp_sum(v);
  return v;
}

__global__ void unrolled_rms_norm_kernel(float* __restrict__ out, const float* __restrict__ in,
                                         const float* __restrict__ weight, int hidden, float eps) {
  const float* row = in + static_cast<int64_t>(blockIdx.x) * hidden;
  float ss = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = row[i];
    ss += v * v;
  }
  ss = unrolled_block_sum(ss);
  const float r = rsqrtf(ss / hidden + eps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    out[static_cast<int64_t>(blockIdx.x) * hidden + i] = row[i] * r * weight[i];
  }
}

void unrolled_rms_norm(float* out, const float* in, const float* weight, int rows, int hidden, float eps) {
  unrolled_rms_norm_kernel<<<rows, 256>>>(out, in, weight, hidden, eps);
}
