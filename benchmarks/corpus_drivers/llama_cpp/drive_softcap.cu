// Drives ggml-cuda/softcap.cu through its own host launcher.
#include "softcap.cu"

#include "../wrap.h"

CORPUS_ENTRY softcap(const float * x, float * dst, float s, float cap, int k) {
    softcap_f32_cuda(x, dst, s, cap, k, 0);
    CORPUS_STATUS;
}
