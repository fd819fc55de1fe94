// Drives ggml-cuda/rope.cu through its own host launcher.
#include "rope.cu"

#include "../wrap.h"

CORPUS_ENTRY rope_neox(const float * x, float * dst, int ne0, int ne1, int s1, int s2, int n_dims, int nr, const int * pos, float freq_base) {
    const rope_corr_dims corr = {{0.0f, 0.0f}};
    rope_neox_cuda<true, float>(x, dst, ne0, ne1, s1, s2, n_dims, nr, pos, 1.0f, freq_base, 0.0f, 1.0f, corr, nullptr, 0);
    CORPUS_STATUS;
}
