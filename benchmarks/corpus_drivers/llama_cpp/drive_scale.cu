// Drives ggml-cuda/scale.cu through its own host launcher.
#include "scale.cu"

#include "../wrap.h"

CORPUS_ENTRY scale(const float * x, float * dst, float s, float bias, int k) {
    scale_f32_cuda(x, dst, s, bias, k, 0);
    CORPUS_STATUS;
}
