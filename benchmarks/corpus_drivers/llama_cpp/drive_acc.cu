// Drives ggml-cuda/acc.cu through its own host launcher.
#include "acc.cu"

#include "../wrap.h"

CORPUS_ENTRY acc(const float * x, const float * y, float * dst, long n, long ne10, long ne11, long ne12, long ne13, long s1, long s2, long s3, long offset) {
    acc_f32_cuda(x, y, dst, n, ne10, ne11, ne12, ne13, s1, s2, s3, offset, 0);
    CORPUS_STATUS;
}
