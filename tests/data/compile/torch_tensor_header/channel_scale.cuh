// Scales each channel of an [num, channels, spatial] tensor by its own factor; torch is reached only through the
// extension's helper header.
#pragma once
#include "ext_helper.hpp"

template <typename T>
__global__ void channel_scale_kernel(int n, const T* in, const float* scale, T* out, int channels, int spatial) {
  GRID_STRIDE_LOOP(index, n) {
    const int c = (index / spatial) % channels;
    out[index] = static_cast<T>(static_cast<float>(in[index]) * scale[c]);
  }
}

