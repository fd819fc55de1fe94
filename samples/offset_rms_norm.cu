// RMSNorm in the style of communication-fused serving kernels: one block per token, each thread starting at its
// own element offset (`threadIdx.x * kPack`) and stepping by the block's packs (`blockDim.x * kPack`), the packs
// held in a struct whose `load`/`store` move a `uint4`, the sum of squares accumulated by a helper and reduced by a
// block-reduction helper, the output written from a pointer moved to the token's row. It waits on the previous
// kernel and lets the next one start (programmatic dependent launch). The row's length is a multiple of kPack.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace comm_norm {

constexpr int kWarp = 32;

template <typename T, int N>
struct alignas(16) Pack {
  T v[N];
  __device__ __forceinline__ void load(const T* p) { *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(p); }
  __device__ __forceinline__ void store(T* p) const { *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(v); }
};

template <typename T, int N>
__device__ __forceinline__ float sum_squares(float acc, const Pack<T, N>& p) {
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const float f = static_cast<float>(p.v[k]);
    acc += f * f;
  }
  return acc;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x / kWarp) ? partial[lane] : 0.f;
  return warp_sum(v);
}

template <typename T>
__global__ void offset_rms_norm_kernel(T* __restrict__ out, const T* __restrict__ in, const T* __restrict__ weight,
                                       const int hidden, const float eps) {
  constexpr int kPack = 16 / sizeof(T);
  const int token = blockIdx.x;
  const int thread_offset = threadIdx.x * kPack;
  const T* row = in + token * hidden;
  out += token * hidden;

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif

  float acc = 0.f;
  for (int offset = thread_offset; offset < hidden; offset += blockDim.x * kPack) {
    Pack<T, kPack> x;
    x.load(row + offset);
    acc = sum_squares<T, kPack>(acc, x);
  }
  acc = block_sum(acc);
  const float inv_rms = rsqrtf(acc / hidden + eps);

  for (int offset = thread_offset; offset < hidden; offset += blockDim.x * kPack) {
    Pack<T, kPack> x, w, y;
    x.load(row + offset);
    w.load(weight + offset);
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      y.v[k] = static_cast<T>(static_cast<float>(x.v[k]) * inv_rms * static_cast<float>(w.v[k]));
    }
    y.store(out + offset);
  }

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// The fused residual add: x + residual written back to the residual and staged in dynamic shared memory, each
// thread its own packs (`&staged[offset]`), for the second pass; the normalised row written over x.
template <typename T>
__global__ void offset_add_rms_norm_kernel(T* __restrict__ x, T* __restrict__ residual,
                                           const T* __restrict__ weight, const int hidden, const float eps) {
  constexpr int kPack = 16 / sizeof(T);
  extern __shared__ uint8_t smem_bytes[];
  T* staged = reinterpret_cast<T*>(smem_bytes);
  const int thread_offset = threadIdx.x * kPack;
  x += blockIdx.x * hidden;
  residual += blockIdx.x * hidden;

  float acc = 0.f;
  for (int offset = thread_offset; offset < hidden; offset += blockDim.x * kPack) {
    Pack<T, kPack> a, b;
    a.load(x + offset);
    b.load(residual + offset);
#pragma unroll
    for (int k = 0; k < kPack; ++k) a.v[k] = static_cast<T>(static_cast<float>(a.v[k]) + static_cast<float>(b.v[k]));
    a.store(residual + offset);
    a.store(&staged[offset]);
    acc = sum_squares<T, kPack>(acc, a);
  }
  acc = block_sum(acc);
  const float inv_rms = rsqrtf(acc / hidden + eps);

  for (int offset = thread_offset; offset < hidden; offset += blockDim.x * kPack) {
    Pack<T, kPack> a, w, y;
    a.load(&staged[offset]);
    w.load(weight + offset);
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
      y.v[k] = static_cast<T>(static_cast<float>(a.v[k]) * inv_rms * static_cast<float>(w.v[k]));
    }
    y.store(x + offset);
  }
}

}  // namespace comm_norm

// A warp-multiple block of threads covering the row's packs, up to 1024: one pack per thread up to 8192 halves.
void launch_offset_rms_norm(__half* out, const __half* in, const __half* weight, int tokens, int hidden, float eps,
                            cudaStream_t stream) {
  const int packs = hidden / 8;
  const int threads = packs < 1024 ? (packs + comm_norm::kWarp - 1) / comm_norm::kWarp * comm_norm::kWarp : 1024;
  comm_norm::offset_rms_norm_kernel<__half><<<tokens, threads, 0, stream>>>(out, in, weight, hidden, eps);
}

void launch_offset_add_rms_norm(__half* x, __half* residual, const __half* weight, int tokens, int hidden, float eps,
                                cudaStream_t stream) {
  const int packs = hidden / 8;
  const int threads = packs < 1024 ? (packs + comm_norm::kWarp - 1) / comm_norm::kWarp * comm_norm::kWarp : 1024;
  const size_t staged = hidden * sizeof(__half);
  comm_norm::offset_add_rms_norm_kernel<__half><<<tokens, threads, staged, stream>>>(x, residual, weight, hidden, eps);
}
