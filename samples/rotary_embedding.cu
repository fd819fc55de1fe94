// Rotary position embedding over query and key heads, in place (GPT-NeoX layout: the first and second
// halves of each head's rotary dims form the pairs), as LLM-serving stacks apply it before attention.
// Written in the style of production serving kernels known to be slow: one block per token,
// min(num_heads * rot_dim / 2, 512) threads, one scalar pair per thread per iteration, index divisions
// per element, and a PyTorch entry point (the host part needs torch; the kernel does not).
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

namespace serving {

template <typename scalar_t>
inline __device__ void apply_token_rotary_embedding(scalar_t* __restrict__ arr,
                                                    const scalar_t* __restrict__ cos_ptr,
                                                    const scalar_t* __restrict__ sin_ptr, int rot_offset,
                                                    int embed_dim) {
  const int x_index = rot_offset;
  const int y_index = embed_dim + rot_offset;
  const float cos = static_cast<float>(__ldg(cos_ptr + x_index));
  const float sin = static_cast<float>(__ldg(sin_ptr + x_index));
  const float x = static_cast<float>(arr[x_index]);
  const float y = static_cast<float>(arr[y_index]);
  arr[x_index] = static_cast<scalar_t>(x * cos - y * sin);
  arr[y_index] = static_cast<scalar_t>(y * cos + x * sin);
}

template <typename scalar_t>
__global__ void rotary_embedding_kernel(
    const int64_t* __restrict__ positions,        // [num_tokens]
    scalar_t* __restrict__ query,                 // [num_tokens, num_heads, head_size]
    scalar_t* __restrict__ key,                   // [num_tokens, num_kv_heads, head_size]
    const scalar_t* __restrict__ cos_sin_cache,   // [max_position, 2, rot_dim // 2]
    const int rot_dim, const int64_t query_stride, const int64_t key_stride, const int num_heads,
    const int num_kv_heads, const int head_size) {
  // Each thread block is responsible for one token.
  const int token_idx = blockIdx.x;
  const int64_t pos = positions[token_idx];
  const scalar_t* cache_ptr = cos_sin_cache + pos * rot_dim;

  const int embed_dim = rot_dim / 2;
  const scalar_t* cos_ptr = cache_ptr;
  const scalar_t* sin_ptr = cache_ptr + embed_dim;

  const int nq = num_heads * embed_dim;
  for (int i = threadIdx.x; i < nq; i += blockDim.x) {
    const int head_idx = i / embed_dim;
    const int64_t token_head = token_idx * query_stride + head_idx * head_size;
    const int rot_offset = i % embed_dim;
    apply_token_rotary_embedding<scalar_t>(query + token_head, cos_ptr, sin_ptr, rot_offset, embed_dim);
  }

  const int nk = num_kv_heads * embed_dim;
  for (int i = threadIdx.x; i < nk; i += blockDim.x) {
    const int head_idx = i / embed_dim;
    const int64_t token_head = token_idx * key_stride + head_idx * head_size;
    const int rot_offset = i % embed_dim;
    apply_token_rotary_embedding<scalar_t>(key + token_head, cos_ptr, sin_ptr, rot_offset, embed_dim);
  }
}

}  // namespace serving

void rotary_embedding(torch::Tensor& positions,      // [num_tokens]
                      torch::Tensor& query,          // [num_tokens, num_heads * head_size]
                      torch::Tensor& key,            // [num_tokens, num_kv_heads * head_size]
                      int64_t head_size,
                      torch::Tensor& cos_sin_cache)  // [max_position, rot_dim]
{
  const int64_t num_tokens = positions.numel();
  const int rot_dim = cos_sin_cache.size(1);
  const int num_heads = query.size(-1) / head_size;
  const int num_kv_heads = key.size(-1) / head_size;
  const int64_t query_stride = query.stride(-2);
  const int64_t key_stride = key.stride(-2);

  dim3 grid(num_tokens);
  dim3 block(std::min<int64_t>(num_heads * rot_dim / 2, 512));
  const at::cuda::OptionalCUDAGuard device_guard(device_of(query));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, query.scalar_type(),
                                  "rotary_embedding", [&] {
                                    serving::rotary_embedding_kernel<scalar_t><<<grid, block, 0, stream>>>(
                                        positions.data_ptr<int64_t>(), query.data_ptr<scalar_t>(),
                                        key.data_ptr<scalar_t>(), cos_sin_cache.data_ptr<scalar_t>(), rot_dim,
                                        query_stride, key_stride, num_heads, num_kv_heads, head_size);
                                  });
}
