// KV-cache write and a token mask in the style of an LLM-serving engine's cache file: a slot mapping (an
// int64 array that picks the cache row each token goes to), a `bool*` mask, grids written as
// `tensor.size(0)` right at the launch, a block size from an overridable #define, and torch host code.
#include <ATen/cuda/CUDAContext.h>
#include <torch/all.h>
#include <c10/cuda/CUDAGuard.h>

#ifndef CACHE_BLOCK_THREADS
#define CACHE_BLOCK_THREADS 256
#endif

namespace vllm {

template <typename scalar_t>
__global__ void reshape_and_cache_kernel(const scalar_t* __restrict__ key,    // [num_tokens, num_heads, head_size]
                                         const scalar_t* __restrict__ value,  // [num_tokens, num_heads, head_size]
                                         scalar_t* __restrict__ key_cache,    // [num_slots, num_heads, head_size]
                                         scalar_t* __restrict__ value_cache,  // [num_slots, num_heads, head_size]
                                         const int64_t* __restrict__ slot_mapping,  // [num_tokens]
                                         const int num_heads, const int head_size) {
  const int64_t token_idx = blockIdx.x;
  const int64_t slot_idx = slot_mapping[token_idx];
  if (slot_idx < 0) {
    return;  // a padding token
  }
  const int n = num_heads * head_size;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    key_cache[slot_idx * n + i] = key[token_idx * n + i];
    value_cache[slot_idx * n + i] = value[token_idx * n + i];
  }
}

// Masked-out vocabulary entries get -inf (a grammar's allowed-token mask).
__global__ void apply_token_mask_kernel(float* __restrict__ logits,     // [num_seqs, vocab_size]
                                        const bool* __restrict__ mask,  // [num_seqs, vocab_size]
                                        const int vocab_size) {
  const int64_t row = blockIdx.x;
  for (int i = threadIdx.x; i < vocab_size; i += blockDim.x) {
    if (!mask[row * vocab_size + i]) {
      logits[row * vocab_size + i] = -INFINITY;
    }
  }
}

}  // namespace vllm

void reshape_and_cache(torch::Tensor& key,          // [num_tokens, num_heads, head_size]
                       torch::Tensor& value,        // [num_tokens, num_heads, head_size]
                       torch::Tensor& key_cache,    // [num_slots, num_heads, head_size]
                       torch::Tensor& value_cache,  // [num_slots, num_heads, head_size]
                       torch::Tensor& slot_mapping) {
  int num_heads = key.size(1);
  int head_size = key.size(2);
  dim3 block(std::min(num_heads * head_size, 512));
  const at::cuda::OptionalCUDAGuard device_guard(device_of(key));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::ScalarType::Half, at::ScalarType::BFloat16, key.scalar_type(),
                                  "reshape_and_cache_kernel", [&] {
                                    vllm::reshape_and_cache_kernel<scalar_t><<<slot_mapping.size(0), block, 0, stream>>>(
                                        key.data_ptr<scalar_t>(), value.data_ptr<scalar_t>(),
                                        key_cache.data_ptr<scalar_t>(), value_cache.data_ptr<scalar_t>(),
                                        slot_mapping.data_ptr<int64_t>(), num_heads, head_size);
                                  });
}

void apply_token_mask(torch::Tensor& logits, torch::Tensor& mask) {
  int vocab_size = logits.size(1);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  vllm::apply_token_mask_kernel<<<logits.size(0), CACHE_BLOCK_THREADS, 0, stream>>>(
      logits.data_ptr<float>(), mask.data_ptr<bool>(), vocab_size);
}
