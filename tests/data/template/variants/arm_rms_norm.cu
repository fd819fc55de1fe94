// A fused residual-add RMSNorm whose template flag picks where the summed row waits between the passes: staged in
// dynamic shared memory (kStaged), or, where the host gives each thread one pack of the row, in the thread's own
// register (the second pass then reads the value the first left, as all-reduce fusion kernels write it). Only the
// staged arm is a row reduction row_reduce can rewrite: its variant serves the kStaged instantiations, the others
// run the original body.
#include <cstdint>

__device__ __forceinline__ float arm_block_sum(float v) {
  __shared__ float slots[32];
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane == 0) slots[threadIdx.x / 32] = v;
  __syncthreads();
  v = lane < blockDim.x / 32 ? slots[lane] : 0.f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T, bool kStaged>
__global__ void arm_rms_norm_kernel(T* __restrict__ out, T* __restrict__ residual, const T* __restrict__ x,
                                    const T* __restrict__ weight, int hidden, float eps) {
  extern __shared__ float arm_staged[];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * hidden;
  float sum = 0.f;
  float held = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = static_cast<float>(x[base + i]) + static_cast<float>(residual[base + i]);
    residual[base + i] = static_cast<T>(v);
    held = v;
    if constexpr (kStaged) {
      arm_staged[i] = v;
    }
    sum += v * v;
  }
  sum = arm_block_sum(sum);
  const float r = rsqrtf(sum / hidden + eps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    if constexpr (kStaged) {
      held = arm_staged[i];
    }
    out[base + i] = static_cast<T>(held * r * static_cast<float>(weight[i]));
  }
}

template <typename T>
void arm_rms_norm(T* out, T* residual, const T* x, const T* weight, int rows, int hidden, float eps) {
  if (hidden <= 1024) {  // one element a thread: each keeps its own
    arm_rms_norm_kernel<T, false><<<rows, (hidden + 31) / 32 * 32>>>(out, residual, x, weight, hidden, eps);
  } else {
    arm_rms_norm_kernel<T, true><<<rows, 1024, hidden * sizeof(float)>>>(out, residual, x, weight, hidden, eps);
  }
}
