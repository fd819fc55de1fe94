// Drives ggml-cuda/tsembd.cu through its own host launcher.
#include "tsembd.cu"

#include "../wrap.h"

CORPUS_ENTRY tsembd(const float * x, float * dst, int ne00, int nb1, int dim, int max_period) {
    timestep_embedding_f32_cuda(x, dst, ne00, nb1, dim, max_period, 0);
    CORPUS_STATUS;
}
