// Drives ggml-cuda/opt-step-adamw.cu through its own host launcher.
#include "opt-step-adamw.cu"

#include "../wrap.h"

CORPUS_ENTRY opt_step_adamw(float * x, const float * g, float * m, float * v, const float * pars, long k) {
    opt_step_adamw_f32_cuda(x, g, m, v, pars, k, 0);
    CORPUS_STATUS;
}
