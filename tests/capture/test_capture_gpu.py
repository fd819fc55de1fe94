"""`cutune capture` on a GPU: a CuPy program (driver launches) and the recorded spec it yields."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cutune.capture.log import read_log
from cutune.cli import app
from cutune.spec import load_spec

pytestmark = pytest.mark.gpu

KERNEL = """
template <typename T>
__global__ void scale_kernel(T* __restrict__ out,       // [n]
                             const T* __restrict__ in,  // [n]
                             const float alpha, const int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (T)(alpha * (float)in[i]);
}
"""

PROGRAM = """
import sys
import cupy as cp

src = open(sys.argv[1]).read()
module = cp.RawModule(code=src, name_expressions=["scale_kernel<float>"])
kernel = module.get_function("scale_kernel<float>")
for n, calls in ((1000, 3), (5000, 2)):
    x = cp.random.rand(n, dtype=cp.float32)
    y = cp.empty_like(x)
    for _ in range(calls):
        kernel(((n + 127) // 128,), (128,), (y, x, cp.float32(2.5), cp.int32(n)))
    assert bool(cp.allclose(y, 2.5 * x))
cp.cuda.Device().synchronize()
"""


def test_a_cupy_program_s_launches_become_the_spec(tmp_path: Path) -> None:
    pytest.importorskip("cupti", reason="capture needs cupti-python in the program's environment")
    (tmp_path / "scale.cu").write_text(KERNEL)
    (tmp_path / "program.py").write_text(textwrap.dedent(PROGRAM))
    log = tmp_path / "launches.jsonl"
    res = CliRunner().invoke(
        app,
        [
            "capture",
            "--root",
            str(tmp_path),
            "--log",
            str(log),
            "--",
            sys.executable,
            str(tmp_path / "program.py"),
            str(tmp_path / "scale.cu"),
        ],
    )
    assert res.exit_code == 0, res.output
    launches = read_log(log).launches
    assert sorted(x.count for x in launches) == [2, 3], launches
    assert all(x.params is not None and len(x.params) == 4 for x in launches), [x.why for x in launches]
    spec = load_spec(tmp_path / "scale.tune.toml").kernel("scale_kernel")
    assert spec.sizes == ({"n": 1000}, {"n": 5000})
    assert spec.weights == (3.0, 2.0)
    assert spec.grid == ("ceil_div(n, 128)",)
    assert spec.template_args == {"T": "float"}
    assert {a.name: a.value for a in spec.args}["alpha"] == "2.5"
    assert "TODO" not in (tmp_path / "scale.tune.toml").read_text()


NATIVE = (
    KERNEL
    + """
#include <cstdio>

int main() {
  const int sizes[2] = {1000, 5000};
  const int calls[2] = {3, 2};
  for (int s = 0; s < 2; ++s) {
    const int n = sizes[s];
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    for (int c = 0; c < calls[s]; ++c) {
      scale_kernel<float><<<(n + 127) / 128, 128>>>(y, x, 2.5f, n);
    }
    cudaDeviceSynchronize();
    cudaFree(x);
    cudaFree(y);
  }
  std::printf("done\\n");
  return 0;
}
"""
)


def test_a_native_program_s_launches_become_the_spec(tmp_path: Path) -> None:
    import shutil
    import subprocess

    from cutune.capture.run import shared_libpython

    pytest.importorskip("cupti", reason="capture needs cupti-python where cutune runs (it embeds that Python)")
    if shared_libpython() is None or shutil.which("cc") is None:
        pytest.skip("no shared libpython to embed, or no C compiler")
    (tmp_path / "scale.cu").write_text(NATIVE)
    binary = tmp_path / "scale_bin"
    subprocess.run(["nvcc", "-arch=native", "-o", str(binary), str(tmp_path / "scale.cu")], check=True)
    log = tmp_path / "launches.jsonl"
    res = CliRunner().invoke(app, ["capture", "--root", str(tmp_path), "--log", str(log), "--", str(binary)])
    assert res.exit_code == 0, res.output
    launches = read_log(log).launches
    assert sorted(x.count for x in launches) == [2, 3], launches
    spec = load_spec(tmp_path / "scale.tune.toml").kernel("scale_kernel")
    assert spec.sizes == ({"n": 1000}, {"n": 5000})
    assert spec.weights == (3.0, 2.0)
    assert {a.name: a.value for a in spec.args}["alpha"] == "2.5"
