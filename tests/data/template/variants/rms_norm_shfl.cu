// RMSNorm written with warp shuffles and a shared array of warp sums (no cub), row pointers as locals.
template <typename T>
__global__ void rms_norm_shfl_kernel(T* __restrict__ out, const T* __restrict__ in, const T* __restrict__ weight,
                                     float eps, int rows, int hidden) {
  __shared__ float warp_sums[32];
  __shared__ float inv_rms;
  const T* row = in + static_cast<long long>(blockIdx.x) * hidden;
  T* out_row = out + static_cast<long long>(blockIdx.x) * hidden;
  float sum = 0.f;
  for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
    const float v = static_cast<float>(row[j]);
    sum += v * v;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    sum = lane < (blockDim.x + 31) / 32 ? warp_sums[lane] : 0.f;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) inv_rms = rsqrtf(sum / hidden + eps);
  }
  __syncthreads();
  for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
    out_row[j] = static_cast<T>(static_cast<float>(row[j]) * inv_rms * static_cast<float>(weight[j]));
  }
}
