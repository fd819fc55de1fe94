// Rotary position embedding in the two layouts serving stacks ship, picked at compile time: GPT-NeoX (a head's
// rotary dims split in halves, pair r at (r, half + r)) and GPT-J (interleaved, pair r at (2r, 2r + 1)), in place
// over the token's query heads, with an `invert` flag for the backward pass. Written in the style of production
// serving kernels known to be slow: one block per token, one scalar pair per thread per iteration, the pair's
// positions chosen inside a helper by a plain `if` on the layout parameter, its locals declared first and
// assigned in each branch (C style).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace serving {

template <typename scalar_t, bool NEOX>
__device__ __forceinline__ void rotate_pair(scalar_t* __restrict__ head, const float* __restrict__ cos_row,
                                            const float* __restrict__ sin_row, int pair, int half, bool invert) {
  int first, second;
  float c, s;
  if (NEOX) {
    first = pair;
    second = half + pair;
  } else {
    first = 2 * pair;
    second = 2 * pair + 1;
  }
  c = cos_row[pair];
  s = sin_row[pair];
  if (invert) {
    s = -s;
  }
  const float a = static_cast<float>(head[first]);
  const float b = static_cast<float>(head[second]);
  head[first] = static_cast<scalar_t>(a * c - b * s);
  head[second] = static_cast<scalar_t>(b * c + a * s);
}

template <typename scalar_t, bool NEOX>
__global__ void rotary_styles_kernel(const int32_t* __restrict__ positions,  // [tokens]
                                     scalar_t* __restrict__ query,           // [tokens, heads, head_size]
                                     const float* __restrict__ cos_cache,    // [max_position, rot_dim / 2]
                                     const float* __restrict__ sin_cache,    // [max_position, rot_dim / 2]
                                     const int heads, const int head_size, const int rot_dim, const bool invert) {
  const int token = blockIdx.x;
  const int half = rot_dim / 2;
  const int64_t at = static_cast<int64_t>(positions[token]) * half;
  scalar_t* row = query + static_cast<int64_t>(token) * heads * head_size;
  for (int i = threadIdx.x; i < heads * half; i += blockDim.x) {
    const int h = i / half;
    const int pair = i % half;
    rotate_pair<scalar_t, NEOX>(row + h * head_size, cos_cache + at, sin_cache + at, pair, half, invert);
  }
}

}  // namespace serving

void rotary_styles(const int32_t* positions, __nv_bfloat16* query, const float* cos_cache, const float* sin_cache,
                   int tokens, int heads, int head_size, int rot_dim, bool neox, bool invert, cudaStream_t stream) {
  const dim3 grid(tokens);
  const dim3 block(std::min(heads * rot_dim / 2, 512));
  if (neox) {
    serving::rotary_styles_kernel<__nv_bfloat16, true>
        <<<grid, block, 0, stream>>>(positions, query, cos_cache, sin_cache, heads, head_size, rot_dim, invert);
  } else {
    serving::rotary_styles_kernel<__nv_bfloat16, false>
        <<<grid, block, 0, stream>>>(positions, query, cos_cache, sin_cache, heads, head_size, rot_dim, invert);
  }
}
