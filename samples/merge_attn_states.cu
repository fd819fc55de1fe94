// Merge two partial attention results by their log-sum-exp, as split-KV / cascade attention does:
//   out = (exp(p_lse - m) * p_out + exp(s_lse - m) * s_out) / (exp(p_lse - m) + exp(s_lse - m)),
//   out_lse = log(exp(p_lse - m) + exp(s_lse - m)) + m,  with m = max(p_lse, s_lse).
// Production style: one 16-byte pack per thread, 128 threads per block, sizes passed at run time.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <limits>

template <typename scalar_t>
__device__ __forceinline__ float to_float(scalar_t v) {
  return static_cast<float>(v);
}

template <typename scalar_t, const uint NUM_THREADS>
__global__ void merge_attn_states_kernel(scalar_t* output, float* output_lse, const scalar_t* prefix_output,
                                         const float* prefix_lse, const scalar_t* suffix_output,
                                         const float* suffix_lse, const uint num_tokens, const uint num_heads,
                                         const uint head_size) {
  using pack_128b_t = uint4;
  const uint pack_size = 16 / sizeof(scalar_t);
  const uint threads_per_head = head_size / pack_size;

  const uint global_idx = blockIdx.x * NUM_THREADS + threadIdx.x;
  const uint token_head_threads = num_tokens * num_heads * threads_per_head;
  if (global_idx >= token_head_threads) return;

  const uint token_head_idx = global_idx / threads_per_head;
  const uint pack_idx = global_idx % threads_per_head;
  const uint token_idx = token_head_idx / num_heads;
  const uint head_idx = token_head_idx % num_heads;
  const uint pack_offset = pack_idx * pack_size;
  const uint head_offset = token_idx * num_heads * head_size + head_idx * head_size;

  float p_lse = prefix_lse[head_idx * num_tokens + token_idx];
  float s_lse = suffix_lse[head_idx * num_tokens + token_idx];
  p_lse = std::isinf(p_lse) ? -std::numeric_limits<float>::infinity() : p_lse;
  s_lse = std::isinf(s_lse) ? -std::numeric_limits<float>::infinity() : s_lse;
  const float max_lse = fmaxf(p_lse, s_lse);
  const float p_se = expf(p_lse - max_lse);
  const float s_se = expf(s_lse - max_lse);
  const float out_se = p_se + s_se;
  const float p_scale = p_se / out_se;
  const float s_scale = s_se / out_se;

  if (pack_offset < head_size) {
    const pack_128b_t p_pack = reinterpret_cast<const pack_128b_t*>(prefix_output + head_offset)[pack_idx];
    const pack_128b_t s_pack = reinterpret_cast<const pack_128b_t*>(suffix_output + head_offset)[pack_idx];
    pack_128b_t o_pack;
#pragma unroll
    for (uint i = 0; i < pack_size; ++i) {
      const float p = to_float(reinterpret_cast<const scalar_t*>(&p_pack)[i]);
      const float s = to_float(reinterpret_cast<const scalar_t*>(&s_pack)[i]);
      reinterpret_cast<scalar_t*>(&o_pack)[i] = static_cast<scalar_t>(p * p_scale + s * s_scale);
    }
    reinterpret_cast<pack_128b_t*>(output + head_offset)[pack_idx] = o_pack;
  }
  if (output_lse != nullptr && pack_idx == 0) {
    output_lse[head_idx * num_tokens + token_idx] = logf(out_se) + max_lse;
  }
}

// output: [num_tokens, num_heads, head_size]; lse: [num_heads, num_tokens]
void merge_attn_states(torch::Tensor& output, torch::Tensor& output_lse, const torch::Tensor& prefix_output,
                       const torch::Tensor& prefix_lse, const torch::Tensor& suffix_output,
                       const torch::Tensor& suffix_lse) {
  const uint num_tokens = output.size(0);
  const uint num_heads = output.size(1);
  const uint head_size = output.size(2);
  const uint pack_size = 16 / output.element_size();
  constexpr uint NUM_THREADS = 128;
  const uint threads_per_head = head_size / pack_size;
  const uint total_threads = num_tokens * num_heads * threads_per_head;
  dim3 block(NUM_THREADS);
  dim3 grid((total_threads + NUM_THREADS - 1) / NUM_THREADS);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  merge_attn_states_kernel<__nv_bfloat16, NUM_THREADS><<<grid, block, 0, stream>>>(
      reinterpret_cast<__nv_bfloat16*>(output.data_ptr()), output_lse.data_ptr<float>(),
      reinterpret_cast<const __nv_bfloat16*>(prefix_output.data_ptr()), prefix_lse.data_ptr<float>(),
      reinterpret_cast<const __nv_bfloat16*>(suffix_output.data_ptr()), suffix_lse.data_ptr<float>(),
      num_tokens, num_heads, head_size);
}
