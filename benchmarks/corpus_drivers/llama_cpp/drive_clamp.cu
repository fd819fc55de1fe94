// Drives ggml-cuda/clamp.cu through its own host launcher.
#include "clamp.cu"

#include "../wrap.h"

CORPUS_ENTRY clamp(const float * x, float * dst, float lo, float hi, int k) {
    clamp_cuda<float>(x, dst, lo, hi, k, 0);
    CORPUS_STATUS;
}
