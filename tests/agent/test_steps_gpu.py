"""The measured agent loop on a real GPU: built-in transforms, the CuPy backend in its isolated worker,
ncu counters of the best configuration when ncu is there (skipped without a CUDA GPU)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from cutune.agent.record import Outcome
from cutune.agent.sources import BuiltinVariants
from cutune.agent.steps import LoopOptions, run_loop
from cutune.gpu.backend import TimingOptions
from cutune.gpu.registry import create_backend
from cutune.project import open_kernel, tune_options

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


@pytest.mark.gpu
def test_the_builtin_agent_measures_a_variant_of_a_sample_on_the_gpu(tmp_path: Path) -> None:
    ctx = open_kernel(SAMPLES / "rms_norm.cu", "rms_norm_kernel")
    options = dataclasses.replace(
        tune_options(ctx, trials=8, seconds=None, storage_url=f"sqlite:///{tmp_path / 's.db'}"), workspace=tmp_path
    )
    run = run_loop(
        ctx,
        BuiltinVariants(),
        lambda: create_backend("cupy"),
        options,
        LoopOptions(max_steps=1, trials=8),
        timing=TimingOptions(reps=5, min_time_ms=1.0, max_reps=50),
    )
    (step,) = run.records
    assert step.source == "builtin" and step.variant == "row_reduce"  # the pass-removing transform goes first
    assert step.outcome in (Outcome.KEPT, Outcome.NO_GAIN), step.reason  # correct on every size
    assert step.pct_of_floor and all(0 < pct <= 110 for pct in step.pct_of_floor.values())
    assert step.registers is not None and step.registers > 0
    # profiled through the backend's capability: ncu runs the CuPy backend's launcher
    assert step.profile is not None or shutil.which("ncu") is None, step
    assert run.result is not None and run.result.device
    assert (tmp_path / ".cutune" / "results" / "rms_norm.rms_norm_kernel.json").is_file()
