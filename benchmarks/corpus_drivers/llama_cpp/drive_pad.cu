// Drives ggml-cuda/pad.cu through its own host launcher.
#include "pad.cu"

#include "../wrap.h"

CORPUS_ENTRY pad(const float * x, float * dst, int ne00, int ne01, int ne02, int ne03, int ne0, int ne1, int ne2, int ne3) {
    pad_f32_cuda(x, dst, ne00, ne01, ne02, ne03, ne0, ne1, ne2, ne3, 0);
    CORPUS_STATUS;
}
