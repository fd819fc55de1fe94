// Python bindings for the vLLM-style layernorm ops (samples/vllm_style/layernorm_kernels.cu), as a serving
// project's extension declares them.
#include <torch/extension.h>

void rms_norm(torch::Tensor& out, torch::Tensor& input, torch::Tensor& weight, double epsilon);
void fused_add_rms_norm(torch::Tensor& input, torch::Tensor& residual, torch::Tensor& weight, double epsilon);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("rms_norm", &rms_norm, "RMSNorm");
  m.def("fused_add_rms_norm", &fused_add_rms_norm, "residual add + RMSNorm, in place");
}
