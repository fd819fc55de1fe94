// SiLU-and-mul activation, as LLM-serving stacks fuse it after the gate/up projection:
//   out[t, i] = silu(x[t, i]) * x[t, d + i]   for a [num_tokens, 2 * d] input.
// Written in the style of production serving kernels: one block per token, 16-byte packed loads,
// a scalar tail, and a PyTorch entry point (the host part needs torch; the kernel does not).
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

namespace serving {

__device__ __forceinline__ float silu(float x) {
  return x / (1.0f + __expf(-x));
}

template <typename T>
__global__ void silu_and_mul_kernel(T* __restrict__ out, const T* __restrict__ input, const int d) {
  constexpr int kPackElems = 16 / sizeof(T);  // elements in one 16-byte load
  const int64_t token = blockIdx.x;
  const T* x = input + token * 2 * d;
  const T* y = x + d;
  T* o = out + token * d;

  const int num_packs = d / kPackElems;
  for (int p = threadIdx.x; p < num_packs; p += blockDim.x) {
    const uint4 xa = reinterpret_cast<const uint4*>(x)[p];
    const uint4 ya = reinterpret_cast<const uint4*>(y)[p];
    uint4 r;
    const T* xs = reinterpret_cast<const T*>(&xa);
    const T* ys = reinterpret_cast<const T*>(&ya);
    T* rs = reinterpret_cast<T*>(&r);
#pragma unroll
    for (int j = 0; j < kPackElems; ++j) {
      rs[j] = static_cast<T>(silu(static_cast<float>(xs[j])) * static_cast<float>(ys[j]));
    }
    reinterpret_cast<uint4*>(o)[p] = r;
  }
  for (int i = num_packs * kPackElems + threadIdx.x; i < d; i += blockDim.x) {
    o[i] = static_cast<T>(silu(static_cast<float>(x[i])) * static_cast<float>(y[i]));
  }
}

}  // namespace serving

void silu_and_mul(torch::Tensor& out, const torch::Tensor& input) {
  const int d = static_cast<int>(input.size(-1) / 2);
  const int64_t num_tokens = input.numel() / input.size(-1);
  dim3 grid(num_tokens);
  dim3 block(std::min(d, 1024));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (input.scalar_type() == at::ScalarType::BFloat16) {
    serving::silu_and_mul_kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(
        reinterpret_cast<__nv_bfloat16*>(out.data_ptr()),
        reinterpret_cast<const __nv_bfloat16*>(input.data_ptr()), d);
  } else {
    serving::silu_and_mul_kernel<__half><<<grid, block, 0, stream>>>(
        reinterpret_cast<__half*>(out.data_ptr()), reinterpret_cast<const __half*>(input.data_ptr()), d);
  }
}
