// Drives DeepSpeed's csrc/transformer/inference/csrc/gelu.cu through its own host launcher.
#include "transformer/inference/csrc/gelu.cu"

#include "../wrap.h"

CORPUS_ENTRY bias_gelu(__half * input, const __half * bias, int intermediate_size, int batch_size) {
    launch_bias_gelu<__half>(input, bias, intermediate_size, batch_size, 0);
    CORPUS_STATUS;
}
