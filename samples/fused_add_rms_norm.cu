// Fused residual add + RMSNorm, in place, as LLM-serving stacks run it between transformer layers:
//   residual[t, :] += input[t, :];   input[t, i] = bf16(residual[t, i] * rsqrt(mean(residual[t, :]^2) + eps)) * weight[i]
// Written in the style of production serving kernels known to be slow: scalar loads, two passes over
// the row (the second re-reads the residual it just wrote), one block per token, a fixed-size
// cub::BlockReduce<float, 1024>, block = min(hidden, 1024), and a PyTorch entry point.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cub/cub.cuh>

namespace serving {

template <typename scalar_t>
__global__ void fused_add_rms_norm_kernel(scalar_t* __restrict__ input,     // [num_tokens, hidden_size], in/out
                                          scalar_t* __restrict__ residual,  // [num_tokens, hidden_size], in/out
                                          const scalar_t* __restrict__ weight,  // [hidden_size]
                                          const float epsilon, const int num_tokens, const int hidden_size) {
  const int64_t token = blockIdx.x;
  scalar_t* input_row = input + token * hidden_size;
  scalar_t* residual_row = residual + token * hidden_size;
  __shared__ float s_inv_rms;
  float sum_sq = 0.0f;

  for (int i = threadIdx.x; i < hidden_size; i += blockDim.x) {
    scalar_t z = input_row[i];
    z += residual_row[i];
    residual_row[i] = z;
    const float x = static_cast<float>(z);
    sum_sq += x * x;
  }

  typedef cub::BlockReduce<float, 1024> BlockReduce;
  __shared__ typename BlockReduce::TempStorage temp_storage;
  const float total = BlockReduce(temp_storage).Sum(sum_sq, blockDim.x);
  if (threadIdx.x == 0) s_inv_rms = rsqrtf(total / hidden_size + epsilon);
  __syncthreads();

  for (int i = threadIdx.x; i < hidden_size; i += blockDim.x) {
    const float x = static_cast<float>(residual_row[i]);
    input_row[i] = static_cast<scalar_t>(x * s_inv_rms) * weight[i];
  }
}

}  // namespace serving

void fused_add_rms_norm(torch::Tensor& input, torch::Tensor& residual, const torch::Tensor& weight, double epsilon) {
  const int hidden_size = static_cast<int>(input.size(-1));
  const int num_tokens = static_cast<int>(input.numel() / hidden_size);
  dim3 grid(num_tokens);
  dim3 block(std::min(hidden_size, 1024));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (input.scalar_type() == at::ScalarType::BFloat16) {
    serving::fused_add_rms_norm_kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(
        reinterpret_cast<__nv_bfloat16*>(input.data_ptr()), reinterpret_cast<__nv_bfloat16*>(residual.data_ptr()),
        reinterpret_cast<const __nv_bfloat16*>(weight.data_ptr()), static_cast<float>(epsilon), num_tokens,
        hidden_size);
  } else {
    serving::fused_add_rms_norm_kernel<__half><<<grid, block, 0, stream>>>(
        reinterpret_cast<__half*>(input.data_ptr()), reinterpret_cast<__half*>(residual.data_ptr()),
        reinterpret_cast<const __half*>(weight.data_ptr()), static_cast<float>(epsilon), num_tokens, hidden_size);
  }
}
