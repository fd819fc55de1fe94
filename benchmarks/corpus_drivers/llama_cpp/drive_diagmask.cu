// Drives ggml-cuda/diagmask.cu through its own host launcher.
#include "diagmask.cu"

#include "../wrap.h"

CORPUS_ENTRY diagmask(const float * x, float * dst, int ncols, int nrows, int rows_per_channel, int n_past) {
    diag_mask_inf_f32_cuda(x, dst, ncols, nrows, rows_per_channel, n_past, 0);
    CORPUS_STATUS;
}
