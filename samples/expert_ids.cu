// Mixture-of-experts routing: each (token, k) pair's global expert id mapped to the id this rank serves, -1 where
// the expert is out of range or lives elsewhere; written the way MoE libraries write it, the lookup in a helper
// that returns early.
#include <cstdint>

namespace moe {

// The local id of expert `ids[idx]`: -1 when the id is out of range; through `expert_map` (global id → local id,
// -1 for experts another rank holds) when the model is sharded.
template <typename IdT>
__device__ __forceinline__ int32_t local_expert_id(const IdT* __restrict__ ids, const int32_t* __restrict__ expert_map,
                                                   int64_t idx, int32_t num_experts, bool sharded) {
  const int32_t expert = static_cast<int32_t>(ids[idx]);
  if (expert < 0 || expert >= num_experts) {
    return -1;
  }
  int32_t ret = expert;
  if (sharded) {
    ret = expert_map[expert];
  }
  return ret;
}

// Tokens' top-k routing weights, zeroed where the expert is not served here: the softmax weight kept only for a
// served expert.
__device__ __forceinline__ float served_weight(float weight, int32_t local) {
  if (local < 0) return 0.0f;
  return weight;
}

template <typename IdT>
__global__ void map_expert_ids_kernel(int32_t* __restrict__ local_ids, float* __restrict__ weights,
                                      const IdT* __restrict__ topk_ids, const int32_t* __restrict__ expert_map,
                                      int64_t numel, int32_t num_experts, bool sharded) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += stride) {
    const int32_t local = local_expert_id<IdT>(topk_ids, expert_map, i, num_experts, sharded);
    local_ids[i] = local;
    weights[i] = served_weight(weights[i], local);
  }
}

// Tokens routed to each expert this rank serves: the counts a grouped GEMM pads its tiles from. The only read of
// the ids is the helper's.
template <typename IdT>
__global__ void count_expert_tokens_kernel(int32_t* __restrict__ counts, const IdT* __restrict__ topk_ids,
                                           const int32_t* __restrict__ expert_map, int64_t numel,
                                           int32_t num_experts, bool sharded) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel; i += stride) {
    const int32_t local = local_expert_id<IdT>(topk_ids, expert_map, i, num_experts, sharded);
    if (local >= 0) {
      atomicAdd(&counts[local], 1);
    }
  }
}

}  // namespace moe

void map_expert_ids(int32_t* local_ids, float* weights, const int64_t* topk_ids, const int32_t* expert_map,
                    int64_t numel, int32_t num_experts, bool sharded, cudaStream_t stream) {
  const int threads = 256;
  const int64_t blocks = (numel + threads - 1) / threads;
  const int grid = static_cast<int>(blocks < 65535 ? blocks : 65535);
  moe::map_expert_ids_kernel<int64_t><<<grid, threads, 0, stream>>>(local_ids, weights, topk_ids, expert_map, numel,
                                                                     num_experts, sharded);
}

void count_expert_tokens(int32_t* counts, const int64_t* topk_ids, const int32_t* expert_map, int64_t numel,
                         int32_t num_experts, bool sharded, cudaStream_t stream) {
  const int threads = 256;
  const int64_t blocks = (numel + threads - 1) / threads;
  const int grid = static_cast<int>(blocks < 1024 ? blocks : 1024);
  moe::count_expert_tokens_kernel<int64_t><<<grid, threads, 0, stream>>>(counts, topk_ids, expert_map, numel,
                                                                         num_experts, sharded);
}
