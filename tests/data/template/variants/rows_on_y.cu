// Warp-per-row RMSNorm with several rows per block along y (block (32, 4)): the row is the block's y row, the
// launch rounds the rows up to whole blocks and the spare rows leave; and one whose y axis also picks the row's slot
// of shared memory, where thread 0 leaves its own sum for the row (a broadcast, no reduction), which row_reduce
// refuses.
#include <cuda_runtime.h>
#include <stdint.h>

__global__ void warp_rows_rms_norm_kernel(float* __restrict__ out, const float* __restrict__ x,
                                          const float* __restrict__ weight, int rows, int hidden, float eps) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  x += int64_t(row) * hidden;
  out += int64_t(row) * hidden;
  float ss = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) ss += x[i] * x[i];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float scale = rsqrtf(ss / hidden + eps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[i] = x[i] * scale * weight[i];
}

__global__ void slot_rows_kernel(float* __restrict__ out, const float* __restrict__ x, int hidden) {
  __shared__ float slot[8];
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  float s = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) s += x[row * hidden + i];
  if (threadIdx.x == 0) slot[threadIdx.y] = s;
  __syncthreads();
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[row * hidden + i] = slot[threadIdx.y];
}

void launch(float* out, const float* x, const float* weight, int rows, int hidden, cudaStream_t stream) {
  warp_rows_rms_norm_kernel<<<(rows + 3) / 4, dim3(32, 4), 0, stream>>>(out, x, weight, rows, hidden, 1e-6f);
  slot_rows_kernel<<<rows / 4, dim3(32, 4), 0, stream>>>(out, x, hidden);
}
