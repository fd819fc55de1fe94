"""Shared by the template tests: the kernel shapes in tests/data/template, specs for them, and nvcc."""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.spec import ArgSpec, KernelSpec

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "template"
SAMPLES = ROOT / "samples"
NVCC_FLAGS = ("-arch=sm_90", "-std=c++17", "--expt-relaxed-constexpr")

T = TypeVar("T")

# (file, kernel, template arguments of the original instantiation): every kernel shape the tests use
SHAPES: dict[str, tuple[Path, str, dict[str, str]]] = {
    "elementwise_if": (DATA / "elementwise_if.cu", "scale_kernel", {}),
    "elementwise_return": (DATA / "elementwise_return.cu", "relu_kernel", {"T": "float"}),
    "return_in_loop": (DATA / "return_in_loop.cu", "clamp_rows_kernel", {}),
    "grid_stride": (DATA / "grid_stride.cu", "axpy_kernel", {}),
    "row_reduce": (DATA / "row_reduce.cu", "rms_norm_kernel", {"T": "float"}),
    "shared_tile": (DATA / "shared_tile.cu", "block_sum_kernel", {}),
    "multi_launch": (DATA / "multi_launch.cu", "fill_kernel", {}),
    "runtime_block": (DATA / "multi_launch.cu", "negate_kernel", {}),
    "block_2d": (DATA / "block_2d.cu", "transpose_kernel", {}),
    "bounds_1": (DATA / "launch_bounds.cu", "square_kernel", {"T": "float"}),
    "bounds_2": (DATA / "launch_bounds.cu", "dot4_kernel", {"T": "float", "BLOCK": "128"}),
    "bounds_3": (DATA / "launch_bounds.cu", "cluster_kernel", {}),
    "merge_attn_states": (
        SAMPLES / "merge_attn_states.cu",
        "merge_attn_states_kernel",
        {"scalar_t": "__nv_bfloat16", "NUM_THREADS": "128"},
    ),
    "silu_and_mul": (SAMPLES / "silu_and_mul.cu", "silu_and_mul_kernel", {"T": "__half"}),
}


def load(shape: str) -> tuple[SourceModel, str]:
    """The parsed file of a shape and its kernel's name."""
    path, kernel, _ = SHAPES[shape]
    return parse_source(path.read_text(), str(path)), kernel


def spec_for(shape: str, *, args: tuple[ArgSpec, ...] = ()) -> KernelSpec:
    """A minimal spec of a shape's kernel: its template arguments (and any scalar arguments given)."""
    _, kernel, template_args = SHAPES[shape]
    return KernelSpec(kernel, args, ({},), ("1",), ("1",), template_args=dict(template_args))


def nvcc(source: str, *mode: str) -> str:
    """Compile with nvcc (`-ptx` by default) and return the output file; fails the test with the log."""
    mode = mode or ("-ptx",)
    with tempfile.TemporaryDirectory() as tmp:
        unit, out = Path(tmp) / "unit.cu", Path(tmp) / "unit.out"
        unit.write_text(source)
        run = subprocess.run(["nvcc", *NVCC_FLAGS, *mode, str(unit), "-o", str(out)], capture_output=True, text=True)
        assert run.returncode == 0, f"nvcc {' '.join(mode)} failed:\n{run.stderr[-4000:]}\n--- source ---\n{source}"
        return out.read_text(errors="replace") + run.stderr


def kernel_entry(ptx: str, kernel: str) -> str:
    """The one `.entry` of `kernel` in PTX, every mangled name blanked (they encode template arguments)."""
    entries = re.findall(r"^\.visible \.entry (\w+)\((?:.|\n)*?^\}$", ptx, re.M)
    matching = [m for m in entries if kernel in m]
    assert len(matching) == 1, f"expected one entry of {kernel}, found {matching}"
    body = re.search(rf"^\.visible \.entry {matching[0]}\((?:.|\n)*?^\}}$", ptx, re.M)
    assert body is not None
    return re.sub(r"\b_Z\w+", "_Z", body.group())


def in_parallel(jobs: Mapping[str, Callable[[], T]]) -> dict[str, T]:
    """Run independent jobs (compiles) at once; their results by key."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {key: pool.submit(job) for key, job in jobs.items()}
        return {key: f.result() for key, f in futures.items()}
