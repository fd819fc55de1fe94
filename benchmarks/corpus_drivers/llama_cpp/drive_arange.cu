// Drives ggml-cuda/arange.cu through its own host launcher.
#include "arange.cu"

#include "../wrap.h"

CORPUS_ENTRY arange(float * dst, int ne0, float start, float step) {
    arange_f32_cuda(dst, ne0, start, step, 0);
    CORPUS_STATUS;
}
