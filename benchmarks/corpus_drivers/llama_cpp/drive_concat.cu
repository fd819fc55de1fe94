// Drives ggml-cuda/concat.cu through its own host launcher.
#include "concat.cu"

#include "../wrap.h"

CORPUS_ENTRY concat(const float * x, const float * y, float * dst, int ne00, int ne01, int ne02, int ne0, int ne1, int ne2, int dim) {
    concat_f32_cuda(x, y, dst, ne00, ne01, ne02, ne0, ne1, ne2, dim, 0);
    CORPUS_STATUS;
}
