// Namespaces, linkage, execution spaces, templates, types and launch forms.
#include <cuda_fp16.h>
#include "local_helpers.cuh"

#define WARP 32
#define MAX2(a, b) ((a) > (b) ? (a) : (b))

namespace outer {
namespace inner {

struct Pair {
  float a, b;
};
class Box {
 public:
  __device__ float get() const { return v; }
  float v;
};
union Bits {
  float f;
  unsigned int u;
};
enum class Mode { kFast, kSlow };
typedef float real_t;
using index_t = long long;

__host__ __device__ inline int twice(int v) { return 2 * v; }
__device__ __forceinline__ float half_of(float v) { return v * 0.5f; }
static __device__ __noinline__ float third_of(float v) { return v / 3.0f; }

template <typename T, int N = 4, bool kSafe = true>
__global__ void nested_kernel(T* __restrict__ out, const T* in, index_t n) {
  out[0] = in[0] * N;
}

}  // namespace inner
}  // namespace outer

namespace a::b {
__global__ void cpp17_kernel(float* x) { x[0] = 0; }
}  // namespace a::b

extern "C" __global__ void c_kernel(float* x) { x[0] = 1; }

extern "C" {
__global__ void c_block_kernel(float* x) { x[0] = 2; }
}

void host_launch(float* x, outer::inner::index_t n) {
  outer::inner::nested_kernel<float, 8><<<dim3(2, 2), WARP * 4, 512, nullptr>>>(x, x, n);
  a::b::cpp17_kernel<<<1, 32>>>(x);
}
