// Per-head RMSNorm of the query and key heads (QK norm) with a warp per head: the warps of a (32, 4) block grid take
// the heads in turn (a persistent grid capped at 1024 blocks), each thread of a warp kPack consecutive elements a
// round, counted over the rounds with the bounds check inside, held in a small vector type; the head's sum of squares
// is reduced within its warp. head_dim is a multiple of kPack.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace serving {

template <typename T, uint32_t N>
struct alignas(sizeof(T) * N) Vec {
  T e[N];
  __device__ __forceinline__ void fill(float v) {
#pragma unroll
    for (uint32_t k = 0; k < N; ++k) e[k] = T(v);
  }
  __device__ __forceinline__ void load(const T* src) { *this = *reinterpret_cast<const Vec*>(src); }
  __device__ __forceinline__ void store(T* dst) const { *reinterpret_cast<Vec*>(dst) = *this; }
  __device__ __forceinline__ T& operator[](uint32_t k) { return e[k]; }
};

__host__ __device__ constexpr uint32_t ceil_div_u32(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

template <uint32_t kPack, typename T>
__global__ void head_rms_norm_kernel(T* __restrict__ out, const T* __restrict__ in, const T* __restrict__ gamma,
                                     const uint32_t tokens, const uint32_t heads, const uint32_t head_dim,
                                     const float eps) {
  constexpr uint32_t kWarp = 32;
  const uint32_t warps = blockDim.y;
  const uint32_t worker = blockIdx.x * warps + threadIdx.y;
  const uint32_t workers = gridDim.x * warps;
  const uint32_t lane = threadIdx.x;
  const uint32_t threads = kWarp;
  const uint32_t rounds = ceil_div_u32(head_dim, kPack * threads);

  for (uint32_t job = worker; job < tokens * heads; job += workers) {
    const uint32_t base = job * head_dim;  // heads of a token are consecutive
    float ss = 0.f;
    for (uint32_t r = 0; r < rounds; ++r) {
      Vec<T, kPack> v;
      v.fill(0.f);
      const uint32_t at = (r * threads + lane) * kPack;
      if (at < head_dim) v.load(in + base + at);
#pragma unroll
      for (uint32_t k = 0; k < kPack; ++k) ss += static_cast<float>(v[k]) * static_cast<float>(v[k]);
    }
#pragma unroll
    for (uint32_t o = kWarp / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float inv_rms = rsqrtf(ss / static_cast<float>(head_dim) + eps);
    for (uint32_t r = 0; r < rounds; ++r) {
      Vec<T, kPack> v, g, y;
      v.fill(0.f);
      g.fill(0.f);
      const uint32_t at = (r * threads + lane) * kPack;
      if (at < head_dim) {
        v.load(in + base + at);
        g.load(gamma + at);
      }
#pragma unroll
      for (uint32_t k = 0; k < kPack; ++k) {
        y[k] = static_cast<T>(static_cast<float>(v[k]) * inv_rms * static_cast<float>(g[k]));
      }
      if (at < head_dim) y.store(out + base + at);
    }
  }
}

}  // namespace serving

void head_rms_norm_bf16(__nv_bfloat16* out, const __nv_bfloat16* in, const __nv_bfloat16* gamma, uint32_t tokens,
                        uint32_t heads, uint32_t head_dim, float eps, cudaStream_t stream) {
  constexpr uint32_t kWarps = 4;
  const uint32_t blocks = std::min<uint32_t>(1024, serving::ceil_div_u32(tokens * heads, kWarps));
  serving::head_rms_norm_kernel<8, __nv_bfloat16>
      <<<blocks, dim3(32, kWarps), 0, stream>>>(out, in, gamma, tokens, heads, head_dim, eps);
}
