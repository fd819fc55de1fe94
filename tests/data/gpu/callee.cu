// A kernel calling a non-inlined device function that keeps a local array on its stack.
__device__ __noinline__ float pick(const float* p, int i) {
  float local[32];
  for (int k = 0; k < 32; ++k) local[k] = p[k];
  return local[i & 31];
}

__global__ void caller_kernel(float* x, int n) { x[threadIdx.x] = pick(x, n); }
