// Test kernels for thread_packs: a thread's short loops over consecutive elements, read and written as packs.
#include <cuda_fp16.h>
#include <stdint.h>

// 64 weights of 4 bits behind a float scale and offset: the low nibbles are weights 0-31, the high ones 32-63
struct nibble_block {
  float scale;
  float offset;
  uint8_t q[32];
};

// one block of 16 threads per 64-weight block, each thread 2 bytes: weights 2t, 2t + 1 and 32 + 2t, 33 + 2t
template <typename T>
__global__ void dequant_nibbles_kernel(const void* __restrict__ packed, T* __restrict__ out) {
  const nibble_block* blocks = (const nibble_block*)packed;
  const int64_t b = blockIdx.x;
  const int t = threadIdx.x;
  const int n = 2;
  const uint8_t* q = blocks[b].q + n * t;
  T* y = out + b * 64 + n * t;
  const float s = blocks[b].scale;
  const float m = blocks[b].offset;
  for (int l = 0; l < n; ++l) {
    y[l + 0] = static_cast<T>(s * (q[l] & 0xF) + m);
    y[l + 32] = static_cast<T>(s * (q[l] >> 4) + m);
  }
}

// a row of 128 per block of 32 threads, each its own 4 consecutive elements from 4 * t
__global__ void quad_scale_kernel(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ scales) {
  const int64_t row = blockIdx.x;
  const int l0 = 4 * threadIdx.x;
  const float s = scales[row];
  const float* xr = x + row * 128;
  float* yr = y + row * 128;
#pragma unroll
  for (int l = l0; l < l0 + 4; ++l) {
    yr[l] = xr[l] * s;
  }
}

// the same 64-weight blocks written unrolled by hand, as dequantisers are: each thread 2 low and 2 high weights, a
// shift between the pairs
template <typename T>
__global__ void dequant_pairs_kernel(const void* __restrict__ packed, T* __restrict__ out) {
  const nibble_block* blocks = (const nibble_block*)packed;
  const int64_t b = blockIdx.x;
  const int t = threadIdx.x;
  const uint8_t* q = blocks[b].q + 2 * t;
  T* y = out + b * 64 + 2 * t;
  const float s = blocks[b].scale;
  const float m = blocks[b].offset;
  int shift = 0;
  y[0] = static_cast<T>(s * ((q[0] >> shift) & 0xF) + m);
  y[1] = static_cast<T>(s * ((q[1] >> shift) & 0xF) + m);
  shift += 4;
  y[32] = static_cast<T>(s * ((q[0] >> shift) & 0xF) + m);
  y[33] = static_cast<T>(s * ((q[1] >> shift) & 0xF) + m);
}
