// LayerNorm over the rows of a [tokens, hidden] activation, in place, in the style of transformer inference code
// bases: one block per token, the row found by its start (`uint` offsets), three passes over the row in global
// memory (mean, variance, normalise), the block reductions from a project header (block_reduce.cuh), one local
// reused for the row sum and then as the last pass's temporary.
#include <cuda_runtime.h>

#include "block_reduce.cuh"

namespace serving {
namespace kernels {

__global__ void three_pass_layer_norm_kernel(float* matrix, const float* scale, const float* bias, int hidden_size) {
  uint block_start = blockIdx.x * hidden_size;
  uint start = block_start + threadIdx.x;
  uint end = block_start + hidden_size;
  float val = 0.0f;
  for (uint i = start; i < end; i += blockDim.x) {
    val += matrix[i];
  }

  // step 0: the row's mean
  __shared__ float s_mean;
  float reduce_res = blockReduceSum<float>(val);
  if (threadIdx.x == 0) s_mean = reduce_res / float(hidden_size);
  __syncthreads();

  // step 1: its variance
  val = 0.0f;
  for (uint i = start; i < end; i += blockDim.x) {
    float diff = matrix[i] - s_mean;
    val += diff * diff;
  }
  __shared__ float s_var;
  reduce_res = blockReduceSum(val);
  if (threadIdx.x == 0) s_var = rsqrtf(reduce_res / float(hidden_size) + kNormEpsilon);
  __syncthreads();

  // step 2: normalise, scale and shift
  for (uint i = start; i < end; i += blockDim.x) {
    val = matrix[i] - s_mean;
    matrix[i] = val * s_var * __ldg(&scale[i - block_start]) + __ldg(&bias[i - block_start]);
  }
}

}  // namespace kernels
}  // namespace serving

// The host code launches one block per token, 1024 threads at most, rounded up to whole warps.
void launch_three_pass_layer_norm(float* matrix, const float* scale, const float* bias, int tokens, int hidden_size,
                                  cudaStream_t stream) {
  const int threads = ((hidden_size < 1024 ? hidden_size : 1024) + 31) / 32 * 32;
  serving::kernels::three_pass_layer_norm_kernel<<<tokens, threads, 0, stream>>>(matrix, scale, bias, hidden_size);
}
