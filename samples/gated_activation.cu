// Gated activation (SiLU × up), as LLM-serving stacks fuse it after the gate/up projection:
//   out[t, i] = silu(x[t, i]) * x[t, d + i]   for a [num_tokens, 2 * d] input.
// Written in the style of production serving kernels known to be slow: one block per token,
// min(d, 1024) threads, one scalar element per thread per iteration, and a PyTorch entry point
// (the host part needs torch; the kernel does not).
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

namespace serving {

template <typename T>
__device__ __forceinline__ T silu_kernel(const T& x) {
  // x * sigmoid(x), computed in float
  const float f = static_cast<float>(x);
  return static_cast<T>(f / (1.0f + expf(-f)));
}

template <typename scalar_t>
__global__ void act_and_mul_kernel(scalar_t* __restrict__ out,          // [..., d]
                                   const scalar_t* __restrict__ input,  // [..., 2, d]
                                   const int d) {
  const int64_t token_idx = blockIdx.x;
  for (int64_t idx = threadIdx.x; idx < d; idx += blockDim.x) {
    const scalar_t x = __ldg(&input[token_idx * 2 * d + idx]);
    const scalar_t y = __ldg(&input[token_idx * 2 * d + d + idx]);
    out[token_idx * d + idx] = static_cast<scalar_t>(static_cast<float>(silu_kernel(x)) * static_cast<float>(y));
  }
}

}  // namespace serving

void silu_and_mul_gated(torch::Tensor& out,    // [..., d]
                        torch::Tensor& input)  // [..., 2 * d]
{
  const int d = input.size(-1) / 2;
  const int64_t num_tokens = input.numel() / input.size(-1);
  dim3 grid(num_tokens);
  dim3 block(std::min(d, 1024));
  const at::cuda::OptionalCUDAGuard device_guard(device_of(input));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, input.scalar_type(),
                                  "act_and_mul_kernel", [&] {
                                    serving::act_and_mul_kernel<scalar_t><<<grid, block, 0, stream>>>(
                                        out.data_ptr<scalar_t>(), input.data_ptr<scalar_t>(), d);
                                  });
}
