// Weight unpacking for low-bit inference: packed codes split into planes, one plane per position in the byte, the
// layout a planar dequantising GEMM reads. One thread per packed byte, the usual bounds check first; each thread writes
// its byte's codes `n` elements apart, into the planes that follow one another in the output.
#include <cuda_fp16.h>
#include <cstdint>

namespace unpack {

// 4-bit weights, two to a byte, of a [rows, cols] matrix: the high nibbles become the first rows * cols outputs, the
// low nibbles the next, each as (code - zero) * scale with its column's zero point and scale.
template <typename scalar_t>
__global__ void dequant_nibble_planes_kernel(const uint8_t* __restrict__ packed, const scalar_t* __restrict__ scales,
                                             const scalar_t* __restrict__ zeros, scalar_t* __restrict__ out,
                                             const int rows, const int cols) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  const int total = rows * cols;
  if (idx >= total) return;

  const int col = idx % cols;
  const uint8_t byte = packed[idx];
  const float scale = static_cast<float>(scales[col]);
  const float zero = static_cast<float>(zeros[col]);
  out[idx] = static_cast<scalar_t>((static_cast<float>(byte >> 4) - zero) * scale);
  out[idx + total] = static_cast<scalar_t>((static_cast<float>(byte & 0xF) - zero) * scale);
}

// 2-bit codes, four to a byte, lowest bits first, into four planes of n codes.
__global__ void split_crumb_planes_kernel(const uint8_t* __restrict__ packed, uint8_t* __restrict__ planes,
                                          const int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;

  const uint8_t b = packed[i];
  planes[i] = b & 0x3;
  planes[i + n] = (b >> 2) & 0x3;
  planes[i + n * 2] = (b >> 4) & 0x3;
  planes[3 * n + i] = b >> 6;
}

}  // namespace unpack

void dequant_nibble_planes(const uint8_t* packed, const half* scales, const half* zeros, half* out, int rows,
                           int cols, cudaStream_t stream) {
  const int total = rows * cols;
  unpack::dequant_nibble_planes_kernel<half><<<(total + 255) / 256, 256, 0, stream>>>(packed, scales, zeros, out,
                                                                                      rows, cols);
}

void split_crumb_planes(const uint8_t* packed, uint8_t* planes, int n, cudaStream_t stream) {
  unpack::split_crumb_planes_kernel<<<(n + 255) / 256, 256, 0, stream>>>(packed, planes, n);
}
