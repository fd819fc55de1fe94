// Point-cloud gathers over [batch, channels, points] tensors, in the style of 3-D detection and segmentation code:
// the grid's y and z axes pick a channel and a batch, a grid-stride loop over x walks the sampled points, and the
// loop's first statement leaves the thread when its batch or channel lies past the tensor's (grids are rounded up
// on every axis). The first kernel gathers sampled points by index; the second interpolates each point's features
// from its three nearest known points by weights. The host code launches grids of 256 threads over
// (ceil(m / 256), c, b); the interpolation's channels in whole tiles of 8, so its last tile's extra blocks leave.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_loops.cuh"

namespace points {

template <typename T>
__global__ void gather_points_kernel(const int b, const int c, const int n, const int m,
                                     const T* __restrict__ features, const int* __restrict__ idx,
                                     T* __restrict__ out) {
  const int batch = blockIdx.z;
  const int channel = blockIdx.y;
  KERNEL_LOOP(p, m) {
    if (batch >= b || channel >= c) return;
    const int64_t row = static_cast<int64_t>(batch) * c + channel;
    out[row * m + p] = features[row * n + idx[static_cast<int64_t>(batch) * m + p]];
  }
}

template <typename T>
__global__ void three_interpolate_kernel(const int b, const int c, const int n, const int m,
                                         const T* __restrict__ known, const int* __restrict__ idx,
                                         const T* __restrict__ weight, T* __restrict__ out) {
  const int batch = blockIdx.z;
  const int channel = blockIdx.y;
  KERNEL_LOOP(p, m) {
    if (batch >= b || channel >= c) return;
    const int64_t point = static_cast<int64_t>(batch) * m + p;
    const T* row = known + (static_cast<int64_t>(batch) * c + channel) * n;
    out[(static_cast<int64_t>(batch) * c + channel) * m + p] = weight[point * 3] * row[idx[point * 3]] +
                                                              weight[point * 3 + 1] * row[idx[point * 3 + 1]] +
                                                              weight[point * 3 + 2] * row[idx[point * 3 + 2]];
  }
}

}  // namespace points

void gather_points(const float* features, const int* idx, float* out, int b, int c, int n, int m,
                   cudaStream_t stream) {
  const dim3 grid((m + 255) / 256, c, b);
  points::gather_points_kernel<float><<<grid, 256, 0, stream>>>(b, c, n, m, features, idx, out);
}

void three_interpolate(const float* known, const int* idx, const float* weight, float* out, int b, int c, int n,
                       int m, cudaStream_t stream) {
  const dim3 grid((m + 255) / 256, (c + 7) / 8 * 8, b);
  points::three_interpolate_kernel<float><<<grid, 256, 0, stream>>>(b, c, n, m, known, idx, weight, out);
}
