// Drives ggml-cuda/upscale.cu through its own host launcher.
#include "upscale.cu"

#include "../wrap.h"

CORPUS_ENTRY upscale(const float * x, float * dst, int nb00, int nb01, int nb02, int nb03, int ne10, int ne11, int ne12, int ne13, float sf0, float sf1, float sf2, float sf3) {
    upscale_f32_cuda(x, dst, nb00, nb01, nb02, nb03, ne10, ne11, ne12, ne13, sf0, sf1, sf2, sf3, 0);
    CORPUS_STATUS;
}
