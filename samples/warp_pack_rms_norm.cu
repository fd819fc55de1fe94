// RMSNorm launched on a (32, warps) block per token through cudaLaunchKernelEx (programmatic dependent launch),
// in the style of serving libraries that vectorise by hand: each thread owns packs of kPack consecutive elements,
// held in a small pack struct with fill/load/store, and walks its packs with a counted loop over the block's
// rounds, the bounds check inside the loop. The sum of squares is reduced by warp shuffles and the warps' partial
// sums in dynamic shared memory. The row's length is a multiple of kPack (the host picks kPack so). The fused
// residual add keeps x + residual in dynamic shared memory after the warps' sums, each thread its own packs, for the
// second pass.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace serving {

template <typename T, uint32_t N>
struct alignas(sizeof(T) * N) Lanes {
  T lane[N];
  __device__ __forceinline__ void fill(float v) {
#pragma unroll
    for (uint32_t k = 0; k < N; ++k) lane[k] = static_cast<T>(v);
  }
  __device__ __forceinline__ void load(const T* p) { *this = *reinterpret_cast<const Lanes*>(p); }
  __device__ __forceinline__ void store(T* p) const { *reinterpret_cast<Lanes*>(p) = *this; }
  __device__ __forceinline__ T& operator[](uint32_t k) { return lane[k]; }
  __device__ __forceinline__ const T& operator[](uint32_t k) const { return lane[k]; }
};

__host__ __device__ constexpr uint32_t div_up(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

template <uint32_t kPack, typename T>
__global__ void warp_pack_rms_norm_kernel(T* __restrict__ out, const T* __restrict__ in,
                                          const T* __restrict__ gamma, const uint32_t cols,
                                          const uint32_t in_stride, const uint32_t out_stride, const float eps) {
  constexpr uint32_t kWarp = 32;
  const uint32_t token = blockIdx.x;
  const uint32_t lane = threadIdx.x, warp = threadIdx.y;
  const uint32_t warps = blockDim.y;
  const uint32_t tid = warp * kWarp + lane;
  const uint32_t threads = warps * kWarp;
  const uint32_t rounds = div_up(cols, kPack * threads);
  extern __shared__ float warp_sums[];

  float ss = 0.f;
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif

  for (uint32_t r = 0; r < rounds; ++r) {
    Lanes<T, kPack> x;
    x.fill(0.f);
    const uint32_t at = (r * threads + tid) * kPack;
    if (at < cols) x.load(in + token * in_stride + at);
#pragma unroll
    for (uint32_t k = 0; k < kPack; ++k) ss += static_cast<float>(x[k]) * static_cast<float>(x[k]);
  }

#pragma unroll
  for (uint32_t o = kWarp / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) warp_sums[warp] = ss;
  __syncthreads();
  if (warp == 0) {
    ss = lane < warps ? warp_sums[lane] : 0.f;
#pragma unroll
    for (uint32_t o = kWarp / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) warp_sums[0] = ss;
  }
  __syncthreads();
  const float inv_rms = rsqrtf(warp_sums[0] / static_cast<float>(cols) + eps);

  for (uint32_t r = 0; r < rounds; ++r) {
    Lanes<T, kPack> x, g, y;
    x.fill(0.f);
    g.fill(0.f);
    const uint32_t at = (r * threads + tid) * kPack;
    if (at < cols) {
      x.load(in + token * in_stride + at);
      g.load(gamma + at);
    }
#pragma unroll
    for (uint32_t k = 0; k < kPack; ++k) {
      y[k] = static_cast<T>(static_cast<float>(x[k]) * inv_rms * static_cast<float>(g[k]));
    }
    if (at < cols) y.store(out + token * out_stride + at);
  }
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

template <uint32_t kPack, typename T>
__global__ void warp_pack_add_rms_norm_kernel(T* __restrict__ x, T* __restrict__ residual,
                                              const T* __restrict__ gamma, const uint32_t cols, const float eps) {
  constexpr uint32_t kWarp = 32;
  const uint32_t token = blockIdx.x;
  const uint32_t lane = threadIdx.x, warp = threadIdx.y;
  const uint32_t warps = blockDim.y;
  const uint32_t tid = warp * kWarp + lane;
  const uint32_t threads = warps * kWarp;
  const uint32_t rounds = div_up(cols, kPack * threads);
  extern __shared__ float smem[];
  float* staged = smem + kWarp;  // the row's sums x + residual, after the warps' partial sums

  float ss = 0.f;
  for (uint32_t r = 0; r < rounds; ++r) {
    Lanes<T, kPack> a, b;
    Lanes<float, kPack> s;
    a.fill(0.f);
    b.fill(0.f);
    s.fill(0.f);
    const uint32_t at = (r * threads + tid) * kPack;
    if (at < cols) {
      a.load(x + token * cols + at);
      b.load(residual + token * cols + at);
    }
#pragma unroll
    for (uint32_t k = 0; k < kPack; ++k) {
      float v = static_cast<float>(a[k]);
      v += static_cast<float>(b[k]);
      ss += v * v;
      b[k] = static_cast<T>(v);
      s[k] = v;
    }
    if (at < cols) {
      b.store(residual + token * cols + at);
      s.store(staged + at);
    }
  }

#pragma unroll
  for (uint32_t o = kWarp / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0) smem[warp] = ss;
  __syncthreads();
  if (warp == 0) {
    ss = lane < warps ? smem[lane] : 0.f;
#pragma unroll
    for (uint32_t o = kWarp / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) smem[0] = ss;
  }
  __syncthreads();
  const float inv_rms = rsqrtf(smem[0] / static_cast<float>(cols) + eps);

  for (uint32_t r = 0; r < rounds; ++r) {
    Lanes<float, kPack> s;
    Lanes<T, kPack> g, y;
    s.fill(0.f);
    g.fill(0.f);
    const uint32_t at = (r * threads + tid) * kPack;
    if (at < cols) {
      s.load(staged + at);
      g.load(gamma + at);
    }
#pragma unroll
    for (uint32_t k = 0; k < kPack; ++k) y[k] = static_cast<T>(s[k] * inv_rms * static_cast<float>(g[k]));
    if (at < cols) y.store(x + token * cols + at);
  }
}

}  // namespace serving

cudaError_t warp_pack_rms_norm_bf16(__nv_bfloat16* out, const __nv_bfloat16* in, const __nv_bfloat16* gamma,
                                    uint32_t tokens, uint32_t cols, uint32_t in_stride, uint32_t out_stride,
                                    float eps, bool pdl, cudaStream_t stream) {
  constexpr uint32_t kPack = 8;  // 16 bytes of bf16
  const uint32_t warps = std::min<uint32_t>(32, serving::div_up(cols / kPack, 32));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(tokens);
  config.blockDim = dim3(32, warps);
  config.dynamicSmemBytes = warps * sizeof(float);
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = pdl;
  config.attrs = attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, serving::warp_pack_rms_norm_kernel<kPack, __nv_bfloat16>, out, in, gamma, cols,
                            in_stride, out_stride, eps);
}

cudaError_t warp_pack_add_rms_norm_bf16(__nv_bfloat16* x, __nv_bfloat16* residual, const __nv_bfloat16* gamma,
                                        uint32_t tokens, uint32_t cols, float eps, cudaStream_t stream) {
  constexpr uint32_t kPack = 8;
  const uint32_t warps = std::min<uint32_t>(32, serving::div_up(cols / kPack, 32));
  const size_t smem = (32 + cols) * sizeof(float);
  auto kernel = serving::warp_pack_add_rms_norm_kernel<kPack, __nv_bfloat16>;
  cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (status != cudaSuccess) return status;
  dim3 block(32, warps);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(tokens);
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  return cudaLaunchKernelEx(&config, kernel, x, residual, gamma, cols, eps);
}
