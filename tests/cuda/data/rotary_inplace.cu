// Rotary embedding over query and key heads, in place, in production style: the kernel hands each head's
// row to a device function that reads and writes it.
#include <torch/all.h>

namespace serving {

template <typename scalar_t>
__device__ __forceinline__ void apply_token_rotary(scalar_t* __restrict__ arr, const scalar_t* __restrict__ cos_ptr,
                                                   const scalar_t* __restrict__ sin_ptr, int rot_offset,
                                                   int embed_dim) {
  const int x_index = rot_offset;
  const int y_index = embed_dim + rot_offset;
  const float cos = (float)cos_ptr[x_index % embed_dim];
  const float sin = (float)sin_ptr[x_index % embed_dim];
  const float x = (float)arr[x_index];
  const float y = (float)arr[y_index];
  arr[x_index] = (scalar_t)(x * cos - y * sin);
  arr[y_index] = (scalar_t)(y * cos + x * sin);
}

template <typename scalar_t>
__global__ void rotary_embedding_kernel(const int64_t* __restrict__ positions,  // [num_tokens]
                                        scalar_t* __restrict__ query,  // [num_tokens, num_heads, head_size]
                                        scalar_t* __restrict__ key,    // [num_tokens, num_kv_heads, head_size]
                                        const scalar_t* __restrict__ cos_sin_cache,  // [max_position, rot_dim]
                                        const int rot_dim, const int num_heads, const int num_kv_heads,
                                        const int head_size) {
  const int token_idx = blockIdx.x;
  const int64_t pos = positions[token_idx];
  const scalar_t* cache_ptr = cos_sin_cache + pos * rot_dim;
  const int embed_dim = rot_dim / 2;
  const scalar_t* cos_ptr = cache_ptr;
  const scalar_t* sin_ptr = cache_ptr + embed_dim;
  for (int i = threadIdx.x; i < num_heads * embed_dim; i += blockDim.x) {
    const int head_idx = i / embed_dim;
    apply_token_rotary<scalar_t>(query + (token_idx * num_heads + head_idx) * head_size, cos_ptr, sin_ptr,
                                 i % embed_dim, embed_dim);
  }
  for (int i = threadIdx.x; i < num_kv_heads * embed_dim; i += blockDim.x) {
    const int head_idx = i / embed_dim;
    apply_token_rotary<scalar_t>(key + (token_idx * num_kv_heads + head_idx) * head_size, cos_ptr, sin_ptr,
                                 i % embed_dim, embed_dim);
  }
}

}  // namespace serving

void rotary_embedding(torch::Tensor& positions, torch::Tensor& query, torch::Tensor& key, int64_t head_size,
                      torch::Tensor& cos_sin_cache) {
  int64_t num_tokens = positions.numel();
  int rot_dim = cos_sin_cache.size(1);
  int num_heads = query.size(-1) / head_size;
  int num_kv_heads = key.size(-1) / head_size;
  dim3 grid(num_tokens);
  dim3 block(std::min<int64_t>(num_heads * rot_dim / 2, 512));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, query.scalar_type(), "rope", [&] {
    serving::rotary_embedding_kernel<scalar_t><<<grid, block>>>(
        positions.data_ptr<int64_t>(), query.data_ptr<scalar_t>(), key.data_ptr<scalar_t>(),
        cos_sin_cache.data_ptr<scalar_t>(), rot_dim, num_heads, num_kv_heads, head_size);
  });
}
