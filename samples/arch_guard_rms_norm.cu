// RMSNorm over token rows whose 16-bit form is only built for sm_80 and newer: before that the kernel is a stub
// that returns, written with an `if constexpr` opened inside one `#if` and closed inside another (a shape that
// only the compiler's passes see balanced). Rows a router marked finished are skipped. One block per token, the
// sum of squares reduced by warp shuffles and shared memory.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <type_traits>

namespace serving {

template <typename T>
__global__ void arch_guard_rms_norm_kernel(T* __restrict__ out,             // [num_tokens, hidden]
                                           const T* __restrict__ input,     // [num_tokens, hidden]
                                           const T* __restrict__ weight,    // [hidden]
                                           const bool* __restrict__ finished,  // [num_tokens] or null
                                           const float eps, const int hidden) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return;  // no bf16 arithmetic before sm_80
  } else {
#endif
    __shared__ float partial[32];
    __shared__ float inv_rms;
    if (finished != nullptr && finished[blockIdx.x]) return;
    const T* row_in = input + static_cast<int64_t>(blockIdx.x) * hidden;
    T* row_out = out + static_cast<int64_t>(blockIdx.x) * hidden;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
      const float x = static_cast<float>(row_in[i]);
      sum += x * x;
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
      row_out[i] = static_cast<T>(static_cast<float>(row_in[i]) * inv_rms * static_cast<float>(weight[i]));
    }
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
  }
#endif
}

}  // namespace serving

void arch_guard_rms_norm_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, const __nv_bfloat16* weight,
                              const bool* finished, float eps, int num_tokens, int hidden, cudaStream_t stream) {
  const int threads = hidden < 1024 ? (hidden + 31) / 32 * 32 : 1024;
  serving::arch_guard_rms_norm_kernel<__nv_bfloat16>
      <<<num_tokens, threads, 0, stream>>>(out, input, weight, finished, eps, hidden);
}
