// Drives ggml-cuda/opt-step-sgd.cu through its own host launcher.
#include "opt-step-sgd.cu"

#include "../wrap.h"

CORPUS_ENTRY opt_step_sgd(float * x, const float * g, const float * pars, long k) {
    opt_step_sgd_f32_cuda(x, g, pars, k, 0);
    CORPUS_STATUS;
}
