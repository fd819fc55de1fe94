// Row softmax: a max reduction, then a sum of exponentials, both by cub::BlockReduce; half rows.
#include <cuda_fp16.h>
#include <cub/block/block_reduce.cuh>

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <int BLOCK>
__global__ void softmax_kernel(__half* __restrict__ y, const __half* __restrict__ x, int cols) {
  typedef cub::BlockReduce<float, BLOCK> Reduce;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ float row_max, row_sum;
  const __half* xr = x + (size_t)blockIdx.x * cols;
  __half* yr = y + (size_t)blockIdx.x * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, __half2float(xr[c]));
  const float block_max = Reduce(tmp).Reduce(m, MaxOp());
  if (threadIdx.x == 0) row_max = block_max;
  __syncthreads();
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(__half2float(xr[c]) - row_max);
  const float block_sum = Reduce(tmp).Sum(s);
  if (threadIdx.x == 0) row_sum = block_sum;
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = __float2half(__expf(__half2float(xr[c]) - row_max) / row_sum);
}
