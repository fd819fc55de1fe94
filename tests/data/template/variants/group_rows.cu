// GroupNorm over a flat array: one block per group of `group_size` consecutive values (the last group may be
// short), its loops over the group's absolute index range; the mean's accumulator is set afresh and reused for the
// variance.
#include <cuda_runtime.h>

template <int BLOCK>
__global__ void group_norm_kernel(float* __restrict__ out, const float* __restrict__ in, int group_size, int total,
                                  float eps) {
  const int first = blockIdx.x * group_size + threadIdx.x;
  const int last = min(static_cast<int>(blockIdx.x + 1) * group_size, total);
  __shared__ float warp_sums[BLOCK / 32];
  float acc = 0.f;
  for (int j = first; j < last; j += BLOCK) acc += in[j];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = acc;
  __syncthreads();
  float total_sum = 0.f;
  for (int w = 0; w < BLOCK / 32; ++w) total_sum += warp_sums[w];
  const float mean = total_sum / group_size;
  __syncthreads();
  acc = 0.f;
  for (int j = first; j < last; j += BLOCK) {
    const float d = in[j] - mean;
    out[j] = d;
    acc += d * d;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = acc;
  __syncthreads();
  float total_sq = 0.f;
  for (int w = 0; w < BLOCK / 32; ++w) total_sq += warp_sums[w];
  const float rstd = rsqrtf(total_sq / group_size + eps);
  for (int j = first; j < last; j += BLOCK) out[j] *= rstd;
}

void launch(float* out, const float* in, int groups, int group_size, int total, cudaStream_t stream) {
  group_norm_kernel<256><<<groups, 256, 0, stream>>>(out, in, group_size, total, 1e-5f);
}
