"""PDL written into a file: the kernel's wait, and every launch through cudaLaunchKernelEx with the attribute;
nvcc compiles the result, host code included."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cutune.apply.pdl import with_dependent_launch

HOST = """\
#include <cuda_runtime.h>

template <typename T>
__global__ void scale(T* out, const T* in, T s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = s * in[i];
}

void launch(float* out, const float* in, float s, int n, cudaStream_t stream) {
  if (n > 4096) {
    scale<float><<<(n + 255) / 256, 256, 0, stream>>>(out, in, s, n);
  } else {
    scale<float><<<dim3(1), dim3(n)>>>(out, in, s, n);
  }
}
"""


def _compiles(text: str, tmp_path: Path) -> None:
    """nvcc compiles the rewritten file, host code included (skipped without nvcc)."""
    if subprocess.run(["which", "nvcc"], capture_output=True).returncode != 0:
        pytest.skip("nvcc is not on PATH")
    (tmp_path / "k.cu").write_text(text)
    done = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", "-c", "k.cu", "-o", "k.o"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_every_launch_sets_the_attribute_and_the_kernel_waits(tmp_path) -> None:
    text, why = with_dependent_launch(HOST, "k.cu", "scale")
    assert why == ""
    assert text.count("cudaLaunchKernelEx(&pdl_config, scale<float>, out, in, s, n);") == 2
    assert "<<<" not in text and "pdl_config.stream = stream;" in text and "pdl_config.stream = 0;" in text
    assert text.index("griddepcontrol.wait") < text.index("int i =")
    _compiles(text, tmp_path)


def test_a_launch_through_a_local_passes_the_local(tmp_path) -> None:
    # the local points at one instance of the kernel or another: cudaLaunchKernelEx takes the pointer as it is
    local = "    auto kernel = n % 2 ? &scale<float> : &scale<float>;\n    kernel<<<dim3(1), dim3(n)>>>(out, in, s, n);"
    text, why = with_dependent_launch(
        HOST.replace("    scale<float><<<dim3(1), dim3(n)>>>(out, in, s, n);", local), "k.cu", "scale"
    )
    assert why == ""
    assert "cudaLaunchKernelEx(&pdl_config, kernel, out, in, s, n);" in text and "<<<" not in text
    _compiles(text, tmp_path)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (HOST.replace("scale<float><<<dim3(1)", "scale<<<dim3(1)"), "deduces scale's template arguments"),
        (
            HOST.replace("  if (n > 4096) {", "  if (n > 4096 && (scale<float><<<1, 1>>>(out, in, s, n), true)) {"),
            "not a statement of its own",
        ),
        (HOST.split("void launch")[0], "no launch of scale"),
    ],
)
def test_launches_it_cannot_write_leave_the_file_as_it_is(text: str, reason: str) -> None:
    kept, why = with_dependent_launch(text, "k.cu", "scale")
    assert kept == text and reason in why
