// KV-cache write, as LLM-serving stacks run it after the QKV projection of every step:
//   key_cache[slot_mapping[t], h, :] = key[t, h, :]   (and the same for value)
// for keys and values of shape [num_tokens, num_heads, head_size], scattered into a paged cache of
// shape [num_blocks, block_size, num_heads, head_size] by a slot mapping (slot = block * block_size +
// offset; negative slots are padding tokens and are skipped). Written in the style of production
// serving kernels: one block per token, a strided loop over the token's heads, a PyTorch entry point.
// Decode steps write 1-256 tokens, prefill thousands: the best launch differs between the two.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>

#include <algorithm>

namespace serving {

// cutune: tunable parameters of kv_cache_write_kernel (defaults are the original choices; `cutune tune` searches them)
struct kv_cache_write_kernel_tuning {
  static constexpr int BLOCK_THREADS = 512;  // threads per block (at most: the launch takes the min with the problem size)
};

template <typename T, int NUM_HEADS_CT = 0, int HEAD_SIZE_CT = 0, int BLOCK_SIZE_CT = 0>
__global__ void kv_cache_write_kernel(const T* __restrict__ key, const T* __restrict__ value,
                                      T* __restrict__ key_cache, T* __restrict__ value_cache,
                                      const int64_t* __restrict__ slot_mapping, const int num_heads_rt,
                                      const int head_size_rt, const int block_size_rt) {
  // cutune: sizes compiled in as constants when specialised (0 = the run-time argument)
  const int num_heads = NUM_HEADS_CT > 0 ? NUM_HEADS_CT : num_heads_rt;
  const int head_size = HEAD_SIZE_CT > 0 ? HEAD_SIZE_CT : head_size_rt;
  const int block_size = BLOCK_SIZE_CT > 0 ? BLOCK_SIZE_CT : block_size_rt;
  const int64_t token = blockIdx.x;
  const int64_t slot = slot_mapping[token];
  if (slot < 0) {
    return;  // a padding token: nothing to cache
  }
  const int64_t block_idx = slot / block_size;
  const int64_t block_offset = slot % block_size;
  const int n = num_heads * head_size;
  const int64_t src = token * n;
  const int64_t dst = (block_idx * block_size + block_offset) * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    key_cache[dst + i] = key[src + i];
    value_cache[dst + i] = value[src + i];
  }
}

}  // namespace serving

// key, value: [num_tokens, num_heads, head_size]; key_cache, value_cache: [num_blocks, block_size,
// num_heads, head_size]; slot_mapping: [num_tokens] (int64)
void kv_cache_write(const torch::Tensor& key, const torch::Tensor& value, torch::Tensor& key_cache,
                    torch::Tensor& value_cache, const torch::Tensor& slot_mapping) {
  const int num_tokens = key.size(0);
  const int num_heads = key.size(1);
  const int head_size = key.size(2);
  const int block_size = key_cache.size(1);
  dim3 grid(num_tokens);
  // cutune: per-size configurations of kv_cache_write_kernel, tuned on NVIDIA H200, 2026-11-23.
  // A size between tuned ones takes the configuration of the nearest tuned num_tokens below it.
  if (num_tokens < 2048) {  // the original configuration
    dim3 block(std::min(num_heads * head_size, serving::kv_cache_write_kernel_tuning::BLOCK_THREADS));
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    serving::kv_cache_write_kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(
        reinterpret_cast<const __nv_bfloat16*>(key.data_ptr()), reinterpret_cast<const __nv_bfloat16*>(value.data_ptr()),
        reinterpret_cast<__nv_bfloat16*>(key_cache.data_ptr()), reinterpret_cast<__nv_bfloat16*>(value_cache.data_ptr()),
        slot_mapping.data_ptr<int64_t>(), num_heads, head_size, block_size);
  } else {  // BLOCK_THREADS=128, SPECIALIZE_HEAD_SIZE=true
    if (head_size == 128) {
      dim3 block(std::min(num_heads * head_size, 128));
      const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
      serving::kv_cache_write_kernel<__nv_bfloat16, 0, 128><<<grid, block, 0, stream>>>(
          reinterpret_cast<const __nv_bfloat16*>(key.data_ptr()), reinterpret_cast<const __nv_bfloat16*>(value.data_ptr()),
          reinterpret_cast<__nv_bfloat16*>(key_cache.data_ptr()), reinterpret_cast<__nv_bfloat16*>(value_cache.data_ptr()),
          slot_mapping.data_ptr<int64_t>(), num_heads, head_size, block_size);
    } else {
      dim3 block(std::min(num_heads * head_size, serving::kv_cache_write_kernel_tuning::BLOCK_THREADS));
      const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
      serving::kv_cache_write_kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(
          reinterpret_cast<const __nv_bfloat16*>(key.data_ptr()), reinterpret_cast<const __nv_bfloat16*>(value.data_ptr()),
          reinterpret_cast<__nv_bfloat16*>(key_cache.data_ptr()), reinterpret_cast<__nv_bfloat16*>(value_cache.data_ptr()),
          slot_mapping.data_ptr<int64_t>(), num_heads, head_size, block_size);
    }
  }
}
