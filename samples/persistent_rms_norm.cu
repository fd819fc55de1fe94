// RMSNorm over [num_tokens, hidden] on a persistent grid: a fixed number of blocks (a few per SM), each looping
// over tokens `token = blockIdx.x; token < num_tokens; token += gridDim.x`, as serving code written for one
// launch shape per GPU does. Per token: a block-stride sum of squares, a warp-shuffle + shared-memory
// reduction, then a block-stride write of x * rsqrt(mean + eps) * weight.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace serving {

template <typename T, int kThreads>
__global__ void __launch_bounds__(kThreads)
    persistent_rms_norm_kernel(T* __restrict__ out,           // [num_tokens, hidden]
                               const T* __restrict__ input,   // [num_tokens, hidden]
                               const T* __restrict__ weight,  // [hidden]
                               const float eps, const int num_tokens, const int hidden) {
  __shared__ float partial[kThreads / 32];
  __shared__ float inv_rms;
  for (int token = blockIdx.x; token < num_tokens; token += gridDim.x) {
    const T* row = input + static_cast<int64_t>(token) * hidden;
    T* dst = out + static_cast<int64_t>(token) * hidden;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
      const float v = static_cast<float>(row[i]);
      sum += v * v;
    }
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
      float total = 0.0f;
      for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += partial[w];
      inv_rms = rsqrtf(total / hidden + eps);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
      dst[i] = static_cast<T>(static_cast<float>(row[i]) * inv_rms * static_cast<float>(weight[i]));
    }
    __syncthreads();  // partial and inv_rms are reused by the block's next token
  }
}

}  // namespace serving

void persistent_rms_norm_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, const __nv_bfloat16* weight,
                              float eps, int num_tokens, int hidden, int sm_count, cudaStream_t stream) {
  const int blocks = std::min(num_tokens, 4 * sm_count);
  serving::persistent_rms_norm_kernel<__nv_bfloat16, 256><<<blocks, 256, 0, stream>>>(out, input, weight, eps,
                                                                                     num_tokens, hidden);
}
