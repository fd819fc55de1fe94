// L2 normalisation of rows a warp each, as inference libraries' ggml-style backends write small-row kernels: the
// warp's width a project macro (`WARP_SIZE`), the row walked in steps of it, the sum of squares reduced by a warp
// shuffle helper, and the host launching WARP_SIZE threads a row.
//   dst[r, i] = x[r, i] / max(||x[r, :]||, eps)
#include <cuda_runtime.h>

#include <cstdint>

#define WARP_SIZE 32

static __device__ __forceinline__ float warp_reduce_sum(float x) {
#pragma unroll
  for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
    x += __shfl_xor_sync(0xffffffff, x, offset, WARP_SIZE);
  }
  return x;
}

static __global__ void l2_norm_rows_f32(const float* x, float* dst, const int ncols, const float eps) {
  const int row = blockIdx.x;
  const int tid = threadIdx.x;

  x += int64_t(row) * ncols;
  dst += int64_t(row) * ncols;

  float sum = 0.0f;
  for (int col = tid; col < ncols; col += WARP_SIZE) {
    const float xi = x[col];
    sum += xi * xi;
  }
  sum = warp_reduce_sum(sum);
  const float scale = rsqrtf(fmaxf(sum, eps * eps));

  for (int col = tid; col < ncols; col += WARP_SIZE) {
    dst[col] = scale * x[col];
  }
}

void l2_norm_rows_f32_cuda(const float* x, float* dst, const int ncols, const int nrows, const float eps,
                           cudaStream_t stream) {
  const dim3 block_dims(WARP_SIZE, 1, 1);
  const dim3 block_nums(nrows, 1, 1);
  l2_norm_rows_f32<<<block_nums, block_dims, 0, stream>>>(x, dst, ncols, eps);
}
