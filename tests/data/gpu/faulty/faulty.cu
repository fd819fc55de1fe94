// Deliberately broken variants of one kernel, for the GPU tests of checking and isolation.
// MODE 0 is the correct original: out[i] = 2 * in[i] + 1.
#include <cuda_fp16.h>

template <int MODE>
__global__ void scale_kernel(float* __restrict__ out, const float* __restrict__ in, const int n,
                             const int* flag) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (MODE == 4) {  // hangs: waits for a flag that nobody sets
    const volatile int* f = flag;
    while (*f == 0) {
    }
  }
  if (i >= n) return;
  if (MODE == 1 && i == n - 1) return;  // skips the last element
  float v = 2.0f * in[i] + 1.0f;
  if (MODE == 2) v = __half2float(__float2half(v));  // wrong rounding: through half precision
  if (MODE == 3 && i == 0) out[1ll << 40] = v;  // illegal address, 4 TiB past the output
  out[i] = v;
}
