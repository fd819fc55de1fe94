"""How the corpus instantiates a kernel that takes a device function as a template argument: with a function
of the file of exactly the pointer's type, or nullptr with the reason. Real tree-sitter, real nvcc."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutune.cuda.extract import extract_kernel
from cutune.cuda.parse import parse_source
from cutune.gpu.compile import compile_resources

from .corpus import instantiation

VLLM = Path(__file__).resolve().parents[2] / "samples" / "vllm_style" / "activation_kernels.cu"


@pytest.mark.nvcc
def test_a_device_function_of_the_pointer_type_is_passed_and_compiles() -> None:
    """`scalar_t (*ACT_FN)(const scalar_t&)` with scalar_t = float: `template <typename T> T silu_kernel(const
    T& x)` instantiated for float is the first function of that type."""
    model = parse_source(VLLM.read_text(), str(VLLM))
    name, why = instantiation(model.kernel("act_and_mul_kernel"), model)
    assert (name, why) == ("act_and_mul_kernel<float, vllm::silu_kernel<float>>", "")
    unit = extract_kernel(model, "act_and_mul_kernel", instantiations=[name])
    assert compile_resources(unit.source, include_dirs=unit.include_dirs, kernel=unit.kernel).registers > 0


def test_no_function_of_the_pointer_type_says_why() -> None:
    text = (
        "__device__ float twice(float x) { return 2.f * x; }\n"  # takes float, not const float&
        "__device__ double half_of(const double& x) { return x / 2; }\n"  # the wrong result type
        "template <typename T, float (*Act)(const float&)>\n"
        "__global__ void act_kernel(T* out, const T* in) { out[threadIdx.x] = Act(in[threadIdx.x]); }\n"
    )
    model = parse_source(text)
    assert instantiation(model.kernel("act_kernel"), model) == (
        "act_kernel<float, nullptr>",
        "Act: no device function of type `float (*)(const float&)` in the file; instantiated with nullptr",
    )
    right = parse_source("__device__ float relu(const float &v) { return v > 0.f ? v : 0.f; }\n" + text)
    assert instantiation(right.kernel("act_kernel"), right) == ("act_kernel<float, relu>", "")
