// LayerNorm forward as inference engines write it, one block per token: the variance comes either from the sums of
// x and x^2 gathered in the one pass over the row (cheaper) or from a second pass over the centred row (exact for
// rows whose mean is large next to their spread), chosen at compile time by `if constexpr` on a template parameter;
// the host code instantiates both and picks one by a flag. Block sums by warp shuffles and the warps' sums in shared
// memory.
//   out[t, i] = (in[t, i] - mean_t) * rsqrt(var_t + eps) * gamma[i] + beta[i]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace infer {

constexpr int kWarp = 32;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// every thread gets the block's sum (the block is whole warps)
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_sums[kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_sum(v);
  __syncthreads();  // a previous call's readers are done with warp_sums
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / kWarp) ? warp_sums[lane] : 0.f;
  return warp_sum(v);
}

template <typename T, bool kOnePassVariance>
__global__ void layer_norm_kernel(T* __restrict__ out,          // [tokens, hidden]
                                  const T* __restrict__ in,     // [tokens, hidden]
                                  const T* __restrict__ gamma,  // [hidden]
                                  const T* __restrict__ beta,   // [hidden]
                                  const float eps, const int hidden) {
  __shared__ float s_mean;
  __shared__ float s_rstd;
  in += static_cast<int64_t>(blockIdx.x) * hidden;
  out += static_cast<int64_t>(blockIdx.x) * hidden;

  float sum = 0.f;
  float sum_sq = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = static_cast<float>(in[i]);
    sum += v;
    if constexpr (kOnePassVariance) sum_sq += v * v;
  }

  if constexpr (kOnePassVariance) {
    sum = block_sum(sum);
    sum_sq = block_sum(sum_sq);
    if (threadIdx.x == 0) {
      s_mean = sum / hidden;
      s_rstd = rsqrtf(fmaxf(sum_sq / hidden - s_mean * s_mean, 0.f) + eps);
    }
    __syncthreads();
  } else {
    sum = block_sum(sum);
    if (threadIdx.x == 0) s_mean = sum / hidden;
    __syncthreads();
    float centred = 0.f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
      const float d = static_cast<float>(in[i]) - s_mean;
      centred += d * d;
    }
    centred = block_sum(centred);
    if (threadIdx.x == 0) s_rstd = rsqrtf(centred / hidden + eps);
    __syncthreads();
  }

  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = (static_cast<float>(in[i]) - s_mean) * s_rstd;
    out[i] = static_cast<T>(v * static_cast<float>(gamma[i]) + static_cast<float>(beta[i]));
  }
}

}  // namespace infer

void layer_norm(__nv_bfloat16* out, const __nv_bfloat16* in, const __nv_bfloat16* gamma, const __nv_bfloat16* beta,
                float eps, int tokens, int hidden, bool one_pass_variance, cudaStream_t stream) {
  const int threads = hidden >= 1024 ? 1024 : (hidden + infer::kWarp - 1) / infer::kWarp * infer::kWarp;
  if (one_pass_variance) {
    infer::layer_norm_kernel<__nv_bfloat16, true><<<tokens, threads, 0, stream>>>(out, in, gamma, beta, eps, hidden);
  } else {
    infer::layer_norm_kernel<__nv_bfloat16, false><<<tokens, threads, 0, stream>>>(out, in, gamma, beta, eps, hidden);
  }
}
