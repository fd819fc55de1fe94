// RMSNorm that already vectorises by hand: each row is read and written as 16-byte packs of 8 bf16 values
// (a pack struct reached through reinterpret_cast), one block per token, the block's threads striding over
// the packs; the sum of squares is reduced by warp shuffles and shared memory. hidden is a multiple of 8.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace serving {

template <typename T>
struct alignas(16) Pack8 {
  T v[8];
};

template <typename T>
__global__ void vec_rms_norm_kernel(T* __restrict__ out,           // [num_tokens, hidden]
                                    const T* __restrict__ input,   // [num_tokens, hidden]
                                    const T* __restrict__ weight,  // [hidden]
                                    const float eps, const int hidden) {
  __shared__ float partial[32];
  __shared__ float inv_rms;
  const int64_t token = blockIdx.x;
  const Pack8<T>* src = reinterpret_cast<const Pack8<T>*>(input + token * hidden);
  const Pack8<T>* w = reinterpret_cast<const Pack8<T>*>(weight);
  Pack8<T>* dst = reinterpret_cast<Pack8<T>*>(out + token * hidden);
  const int packs = hidden / 8;
  float sum = 0.0f;
  for (int p = threadIdx.x; p < packs; p += blockDim.x) {
    const Pack8<T> x = src[p];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float f = static_cast<float>(x.v[j]);
      sum += f * f;
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int k = 0; k < static_cast<int>((blockDim.x + 31) / 32); ++k) total += partial[k];
    inv_rms = rsqrtf(total / hidden + eps);
  }
  __syncthreads();
  for (int p = threadIdx.x; p < packs; p += blockDim.x) {
    const Pack8<T> x = src[p];
    const Pack8<T> g = w[p];
    Pack8<T> y;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      y.v[j] = static_cast<T>(static_cast<float>(x.v[j]) * inv_rms * static_cast<float>(g.v[j]));
    }
    dst[p] = y;
  }
}

}  // namespace serving

void vec_rms_norm_bf16(__nv_bfloat16* out, const __nv_bfloat16* input, const __nv_bfloat16* weight, float eps,
                       int num_tokens, int hidden, cudaStream_t stream) {
  const int threads = std::min(1024, std::max(32, (hidden / 8 + 31) / 32 * 32));
  serving::vec_rms_norm_kernel<__nv_bfloat16><<<num_tokens, threads, 0, stream>>>(out, input, weight, eps, hidden);
}
