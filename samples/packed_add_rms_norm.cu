// Fused residual add + RMSNorm over rows of 16-bit floats, read and written as packs of WIDTH values (a pack struct
// with its own `+=` and sum of squares, reached through reinterpret_cast of the row's pointers). Each loop names a
// pack through 64-bit locals computed from the loop's index (`id`, `strided_id`): the input rows may be strided
// (a slice of a larger tensor), the residual rows are packed. One block per token; the sum of squares is reduced
// by cub. hidden is a multiple of WIDTH; the input's row stride is a multiple of WIDTH. A second kernel fuses a static
// int8 quantisation (one scale per tensor) into the norm and writes its output value by value.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <type_traits>

namespace serving {

template <typename T, int WIDTH>
struct alignas(sizeof(T) * WIDTH) HalfPack {
  T lane[WIDTH];

  __device__ HalfPack& operator+=(const HalfPack& other) {
#pragma unroll
    for (int j = 0; j < WIDTH; ++j) {
      lane[j] = static_cast<T>(static_cast<float>(lane[j]) + static_cast<float>(other.lane[j]));
    }
    return *this;
  }

  __device__ float sum_squares() const {
    float total = 0.0f;
#pragma unroll
    for (int j = 0; j < WIDTH; ++j) {
      const float f = static_cast<float>(lane[j]);
      total += f * f;
    }
    return total;
  }
};

struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

template <typename T, int WIDTH>
__global__ void packed_add_rms_norm_kernel(T* __restrict__ input,           // [num_tokens, row_stride]
                                           const int64_t row_stride,        // input.stride(0)
                                           T* __restrict__ residual,        // [num_tokens, hidden]
                                           const T* __restrict__ weight,    // [hidden]
                                           const float eps, const int hidden) {
  // the pack must be plain data of exactly WIDTH values for the pointer casts below to be sound
  static_assert(std::is_trivially_copyable_v<HalfPack<T, WIDTH>>);
  static_assert(sizeof(HalfPack<T, WIDTH>) == sizeof(T) * WIDTH);

  const int packs = hidden / WIDTH;
  const int64_t packed_stride = row_stride / WIDTH;
  __shared__ float inv_rms;
  float sum = 0.0f;
  auto* __restrict__ input_p = reinterpret_cast<HalfPack<T, WIDTH>*>(input);
  auto* __restrict__ residual_p = reinterpret_cast<HalfPack<T, WIDTH>*>(residual);
  auto* __restrict__ weight_p = reinterpret_cast<const HalfPack<T, WIDTH>*>(weight);

  for (int idx = threadIdx.x; idx < packs; idx += blockDim.x) {
    const int64_t id = static_cast<int64_t>(blockIdx.x) * packs + idx;
    const int64_t strided_id = blockIdx.x * packed_stride + idx;
    HalfPack<T, WIDTH> z = input_p[strided_id];
    z += residual_p[id];
    sum += z.sum_squares();
    residual_p[id] = z;
  }

  using BlockReduce = cub::BlockReduce<float, 1024>;
  __shared__ typename BlockReduce::TempStorage scratch;
  sum = BlockReduce(scratch).Reduce(sum, AddOp{}, blockDim.x);
  if (threadIdx.x == 0) inv_rms = rsqrtf(sum / hidden + eps);
  __syncthreads();

  for (int idx = threadIdx.x; idx < packs; idx += blockDim.x) {
    const int64_t id = blockIdx.x * static_cast<int64_t>(packs) + idx;
    const int64_t strided_id = blockIdx.x * packed_stride + idx;
    const HalfPack<T, WIDTH> z = residual_p[id];
    const HalfPack<T, WIDTH> g = weight_p[idx];
    HalfPack<T, WIDTH> y;
#pragma unroll
    for (int j = 0; j < WIDTH; ++j) {
      y.lane[j] = static_cast<T>(static_cast<float>(z.lane[j]) * inv_rms * static_cast<float>(g.lane[j]));
    }
    input_p[strided_id] = y;
  }
}

// x / scale rounded to the nearest int8, saturated
__device__ __forceinline__ int8_t quantize_int8(float x, float scale_inv) {
  const float q = rintf(x * scale_inv);
  return static_cast<int8_t>(fminf(fmaxf(q, -128.0f), 127.0f));
}

template <typename T, int WIDTH>
__global__ void packed_add_rms_norm_quant_kernel(int8_t* __restrict__ out,         // [num_tokens, hidden]
                                                 const T* __restrict__ input,      // [num_tokens, hidden]
                                                 T* __restrict__ residual,         // [num_tokens, hidden]
                                                 const T* __restrict__ weight,     // [hidden]
                                                 const float* __restrict__ scale,  // [1]
                                                 const float eps, const int hidden) {
  static_assert(sizeof(HalfPack<T, WIDTH>) == sizeof(T) * WIDTH);

  const int packs = hidden / WIDTH;
  __shared__ float inv_rms;
  float sum = 0.0f;
  auto* __restrict__ input_p = reinterpret_cast<const HalfPack<T, WIDTH>*>(input);
  auto* __restrict__ residual_p = reinterpret_cast<HalfPack<T, WIDTH>*>(residual);
  auto* __restrict__ weight_p = reinterpret_cast<const HalfPack<T, WIDTH>*>(weight);

  for (int idx = threadIdx.x; idx < packs; idx += blockDim.x) {
    const int id = blockIdx.x * packs + idx;
    HalfPack<T, WIDTH> z = input_p[id];
    z += residual_p[id];
    sum += z.sum_squares();
    residual_p[id] = z;
  }

  using BlockReduce = cub::BlockReduce<float, 1024>;
  __shared__ typename BlockReduce::TempStorage scratch;
  sum = BlockReduce(scratch).Reduce(sum, AddOp{}, blockDim.x);
  if (threadIdx.x == 0) inv_rms = rsqrtf(sum / hidden + eps);
  __syncthreads();

  // one division per block, not per element
  const float scale_inv = 1.0f / *scale;
  for (int idx = threadIdx.x; idx < packs; idx += blockDim.x) {
    const int id = blockIdx.x * packs + idx;
    const HalfPack<T, WIDTH> z = residual_p[id];
    const HalfPack<T, WIDTH> g = weight_p[idx];
#pragma unroll
    for (int j = 0; j < WIDTH; ++j) {
      // rounded through T first, as the unfused norm followed by a quantiser would
      const T normed = static_cast<T>(static_cast<float>(z.lane[j]) * inv_rms * static_cast<float>(g.lane[j]));
      out[id * WIDTH + j] = quantize_int8(static_cast<float>(normed), scale_inv);
    }
  }
}

}  // namespace serving

void packed_add_rms_norm_bf16(__nv_bfloat16* input, int64_t row_stride, __nv_bfloat16* residual,
                              const __nv_bfloat16* weight, float eps, int num_tokens, int hidden,
                              cudaStream_t stream) {
  const int threads = hidden / 8 < 1024 ? hidden / 8 : 1024;
  serving::packed_add_rms_norm_kernel<__nv_bfloat16, 8>
      <<<num_tokens, threads, 0, stream>>>(input, row_stride, residual, weight, eps, hidden);
}

void packed_add_rms_norm_quant_bf16(int8_t* out, const __nv_bfloat16* input, __nv_bfloat16* residual,
                                    const __nv_bfloat16* weight, const float* scale, float eps, int num_tokens,
                                    int hidden, cudaStream_t stream) {
  const int threads = hidden / 8 < 1024 ? hidden / 8 : 1024;
  serving::packed_add_rms_norm_quant_kernel<__nv_bfloat16, 8>
      <<<num_tokens, threads, 0, stream>>>(out, input, residual, weight, scale, eps, hidden);
}
