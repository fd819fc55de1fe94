// Drives ggml-cuda/unary.cu through its own host launcher.
#include "unary.cu"

#include "../wrap.h"

CORPUS_ENTRY leaky_relu(const float * x, float * dst, int k, float slope) {
    leaky_relu_cuda<float>(x, dst, k, slope, 0);
    CORPUS_STATUS;
}
