"""Programmatic dependent launch on a real GPU: launches with the attribute pass every argument as CuPy does,
order back-to-back kernels that wait on griddepcontrol, and the sample's PDL configuration equals the original
under graph timing."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from cutune.gpu.backend import TimingOptions
from cutune.gpu.cupy_backend import CupyBackend
from cutune.gpu.launch_ex import DependentLaunch
from cutune.project import build_job, open_kernel
from cutune.template.model import PDL, Config
from cutune.workflow.pdl import with_pdl

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
_ARGS = r"""
struct Pair { int a; float b; };
extern "C" __global__ void args(double* out, int i, long long j, float f, double d, unsigned short h, Pair p) {
  out[0] = i; out[1] = (double)j; out[2] = f; out[3] = d; out[4] = h; out[5] = p.a; out[6] = p.b;
}
"""
_STEP = r"""
extern "C" __global__ void step(float* x, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = x[i] * 0.5f + 1.0f;
}
"""


def test_a_dependent_launch_passes_pointers_scalars_and_structs_by_value() -> None:
    import cupy

    out = cupy.zeros(7, dtype=cupy.float64)
    pair = np.array([(7, 2.5)], dtype=[("a", "<i4"), ("b", "<f4")])[0]
    values = (np.int32(-3), np.int64(2**40), np.float32(1.5), np.float64(-2.25), np.uint16(65535), pair)
    DependentLaunch(cupy.RawKernel(_ARGS, "args"), (1, 1, 1), (1, 1, 1), 0, (out, *values))(
        cupy.cuda.get_current_stream().ptr
    )
    assert out.get().tolist() == [-3.0, 2.0**40, 1.5, -2.25, 65535.0, 7.0, 2.5]


def test_back_to_back_dependent_launches_in_a_graph_see_each_others_writes() -> None:
    import cupy

    n = 1 << 20
    x = cupy.zeros(n, dtype=cupy.float32)
    launch = DependentLaunch(cupy.RawKernel(_STEP, "step"), (264, 1, 1), (256, 1, 1), 0, (x, np.int32(n)))
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        for _ in range(40):
            launch(stream.ptr)
        graph = stream.end_capture()
        graph.launch(stream)
    stream.synchronize()
    expected = np.float32(0)
    for _ in range(40):
        expected = expected * np.float32(0.5) + np.float32(1)
    assert np.all(x.get() == expected)  # each launch read the one before it's result, never a stale value


def test_the_samples_pdl_configuration_equals_the_original_under_graph_timing() -> None:
    ctx = with_pdl(open_kernel(ROOT / "samples" / "rms_norm.cu", "rms_norm_kernel"))
    quick = TimingOptions(warmup=1, reps=10, min_time_ms=1.0, max_reps=200, mode="graph")
    backend = CupyBackend()
    try:
        backend.open(build_job(ctx, timing=quick))
        original = ctx.space.default()
        on = backend.evaluate(Config.of({**original, PDL: True}))  # checked against the original by the backend
        off = backend.evaluate(original)
        assert on.ok and off.ok, (on.detail, off.detail)
        for a, b in zip(off.timings, on.timings, strict=True):
            print(f"{a.size}: PDL off {a.median_us:.2f} µs, on {b.median_us:.2f} µs per launch")
    finally:
        backend.close()
    assert dataclasses.replace(ctx.space.param(PDL), values=(False, True)) == ctx.space.param(PDL)
