// RMSNorm over the hidden dimension, as LLM-serving stacks run it before attention and the MLP:
//   out[t, i] = bf16(input[t, i] * rsqrt(mean_i(input[t, :]^2) + eps)) * weight[i]
// Written in the style of production serving kernels known to be slow: scalar loads, two passes over
// the row, one block per token, a fixed-size cub::BlockReduce<float, 1024>, block = min(hidden, 1024),
// and a PyTorch entry point (the host part needs torch; the kernel does not).
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cub/cub.cuh>

namespace serving {

// CCCL in CUDA 13 has no cub::Sum; production code carries its own functor.
struct SumOp {
  __device__ __forceinline__ float operator()(const float a, const float b) const { return a + b; }
};

template <typename scalar_t>
__global__ void rms_norm_kernel(scalar_t* __restrict__ out,          // [num_tokens, hidden_size]
                                const scalar_t* __restrict__ input,  // [num_tokens, hidden_size]
                                const scalar_t* __restrict__ weight, // [hidden_size]
                                const float epsilon, const int num_tokens, const int hidden_size) {
  __shared__ float s_variance;
  float variance = 0.0f;

  for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
    const float x = static_cast<float>(input[blockIdx.x * hidden_size + idx]);
    variance += x * x;
  }

  using BlockReduce = cub::BlockReduce<float, 1024>;
  __shared__ typename BlockReduce::TempStorage reduce_store;
  variance = BlockReduce(reduce_store).Reduce(variance, SumOp{}, blockDim.x);

  if (threadIdx.x == 0) {
    s_variance = rsqrtf(variance / hidden_size + epsilon);
  }
  __syncthreads();

  for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
    const float x = static_cast<float>(input[blockIdx.x * hidden_size + idx]);
    out[blockIdx.x * hidden_size + idx] = static_cast<scalar_t>(x * s_variance) * weight[idx];
  }
}

}  // namespace serving

void rms_norm(torch::Tensor& out, const torch::Tensor& input, const torch::Tensor& weight, double epsilon) {
  const int hidden_size = static_cast<int>(input.size(-1));
  const int num_tokens = static_cast<int>(input.numel() / hidden_size);
  dim3 grid(num_tokens);
  dim3 block(std::min(hidden_size, 1024));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (input.scalar_type() == at::ScalarType::BFloat16) {
    serving::rms_norm_kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(
        reinterpret_cast<__nv_bfloat16*>(out.data_ptr()), reinterpret_cast<const __nv_bfloat16*>(input.data_ptr()),
        reinterpret_cast<const __nv_bfloat16*>(weight.data_ptr()), static_cast<float>(epsilon), num_tokens,
        hidden_size);
  } else {
    serving::rms_norm_kernel<__half><<<grid, block, 0, stream>>>(
        reinterpret_cast<__half*>(out.data_ptr()), reinterpret_cast<const __half*>(input.data_ptr()),
        reinterpret_cast<const __half*>(weight.data_ptr()), static_cast<float>(epsilon), num_tokens, hidden_size);
  }
}
