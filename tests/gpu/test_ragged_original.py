"""An original that reads 16-byte packs faults at a ragged size cutune adds itself: the worker reports the
size and the `multiple_of` it evidently needs, reopens the job assuming it, and tuning goes on."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cutune.gpu.backend import TimingOptions
from cutune.gpu.worker import IsolatedBackend
from cutune.project import build_job, open_kernel
from cutune.template.model import Config

pytestmark = pytest.mark.gpu

PACKS = Path(__file__).resolve().parents[2] / "tests" / "data" / "compile" / "ragged_packs" / "pack_scale.cu"
QUICK = TimingOptions(warmup=2, reps=10, min_time_ms=2.0, max_reps=200, trial_timeout_s=30.0)


@pytest.mark.parametrize("compiler", ["auto", "nvcc"])
def test_a_fault_at_a_ragged_size_names_it_and_tuning_goes_on(compiler: str) -> None:
    job = dataclasses.replace(build_job(open_kernel(PACKS, "pack_scale_kernel")), timing=QUICK)
    worker = IsolatedBackend("cupy", options={"compiler": compiler})
    info = worker.open(job)
    try:
        print("\n".join(info.notes))
        (note,) = info.notes
        assert "ragged size tokens=15, d=4095 (from sizes[0])" in note and "misaligned" in note.lower()
        assert "`multiple_of = { d = 8 }`" in note
        for threads in (256, 128):
            measured = worker.evaluate(Config.of({"BLOCK_THREADS": threads}))
            assert measured.ok, measured.detail
            assert measured.compile is not None and measured.compile.compiler == (
                "nvcc" if compiler == "nvcc" else "nvrtc"
            )
    finally:
        worker.close()
