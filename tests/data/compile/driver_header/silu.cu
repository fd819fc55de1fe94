// SiLU over a flat array; its helper comes from a header that includes <cuda.h> (which needs <stdlib.h>).
#include "cuda_utils.h"

__global__ void silu_kernel(float* __restrict__ out, const float* __restrict__ in, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = silu(in[i]);
}

void silu_forward(float* out, const float* in, int n, cudaStream_t stream) {
  silu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(out, in, n);
}
