// Layout changes as inference runtimes run them between attention and the GEMMs: a strided tensor made contiguous
// (and cast to the cache's type), and a residual add whose scale and bias broadcast along rows and columns. Both are
// written the way generic tensor-library code is: one flat index over the whole output, split back into coordinates
// by integer division and remainder, because that works for any shape and any strides.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace tensor_ops {

// dst[i3][i2][i1][i0] = src[i0 * nb0 + i1 * nb1 + i2 * nb2 + i3 * nb3] (strides in elements), converted to dst_t.
// One element per thread over the contiguous output; threads past the end return.
template <typename src_t, typename dst_t>
__global__ void strided_copy_kernel(const src_t* __restrict__ src, dst_t* __restrict__ dst, const int64_t ne0,
                                    const int64_t ne1, const int64_t ne2, const int64_t ne3, const int64_t nb0,
                                    const int64_t nb1, const int64_t nb2, const int64_t nb3) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= ne0 * ne1 * ne2 * ne3) {
    return;
  }
  const int64_t i0 = i % ne0;
  const int64_t i1 = (i / ne0) % ne1;
  const int64_t i2 = (i / (ne0 * ne1)) % ne2;
  const int64_t i3 = i / (ne0 * ne1 * ne2);
  dst[i] = static_cast<dst_t>(src[i0 * nb0 + i1 * nb1 + i2 * nb2 + i3 * nb3]);
}

// out[r][c] = x[r][c] * row_scale[r] + bias[c] + residual[r][c] over [rows, hidden], a grid-stride loop with 32-bit
// indices (the host code caps the grid).
template <typename T>
__global__ void scale_bias_residual_kernel(T* __restrict__ out, const T* __restrict__ x,
                                           const float* __restrict__ row_scale, const T* __restrict__ bias,
                                           const T* __restrict__ residual, const int rows, const int hidden) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < rows * hidden; i += blockDim.x * gridDim.x) {
    const int row = i / hidden;
    const int col = i % hidden;
    const float scale = row_scale[row];
    const float y = static_cast<float>(x[i]) * scale + static_cast<float>(bias[col]);
    out[i] = static_cast<T>(y + static_cast<float>(residual[i]));
  }
}

}  // namespace tensor_ops

// x: any 4-D float tensor (its strides are used as they are); returns a contiguous fp16 copy.
torch::Tensor contiguous_half(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 4 && x.scalar_type() == torch::kFloat32);
  auto out = torch::empty(x.sizes(), x.options().dtype(torch::kFloat16));
  const int64_t numel = x.numel();
  constexpr int kThreads = 256;
  const int64_t blocks = (numel + kThreads - 1) / kThreads;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  tensor_ops::strided_copy_kernel<float, __half><<<blocks, kThreads, 0, stream>>>(
      x.data_ptr<float>(), reinterpret_cast<__half*>(out.data_ptr()), x.size(3), x.size(2), x.size(1), x.size(0),
      x.stride(3), x.stride(2), x.stride(1), x.stride(0));
  return out;
}

// x, residual: [rows, hidden] fp16; row_scale: [rows] fp32; bias: [hidden] fp16.
torch::Tensor scale_bias_residual(const torch::Tensor& x, const torch::Tensor& row_scale, const torch::Tensor& bias,
                                  const torch::Tensor& residual) {
  const int rows = x.size(0);
  const int hidden = x.size(1);
  auto out = torch::empty_like(x);
  constexpr int kThreads = 256;
  const int blocks = std::min<int64_t>((static_cast<int64_t>(rows) * hidden + kThreads - 1) / kThreads, 65535);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  tensor_ops::scale_bias_residual_kernel<__half><<<blocks, kThreads, 0, stream>>>(
      reinterpret_cast<__half*>(out.data_ptr()), reinterpret_cast<const __half*>(x.data_ptr()),
      row_scale.data_ptr<float>(), reinterpret_cast<const __half*>(bias.data_ptr()),
      reinterpret_cast<const __half*>(residual.data_ptr()), rows, hidden);
  return out;
}
