"""End to end on a real GPU: templatize a sample, search, select, store (skipped without a CUDA GPU)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cutune.gpu.backend import TimingOptions
from cutune.gpu.registry import create_backend
from cutune.project import build_job, open_kernel, tune_options
from cutune.tune.result import read_result
from cutune.tune.run import stored_result_path, tune

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


@pytest.mark.gpu
def test_tuning_a_sample_finds_a_configuration_at_least_as_fast_as_the_original(tmp_path: Path) -> None:
    ctx = open_kernel(SAMPLES / "silu_and_mul.cu", "silu_and_mul_kernel")
    job = build_job(ctx, timing=TimingOptions(warmup=1, reps=10, min_time_ms=0.0))
    options = replace(tune_options(ctx, trials=12, seconds=60), workspace=tmp_path)
    result = tune(job, create_backend("cupy"), options)
    assert result.device and result.trials >= 2 and not result.failures.get("wrong")
    assert result.original == ctx.space.default()
    # noise-aware selection keeps the original unless a candidate is faster beyond the spread
    assert all(s.speedup >= 1.0 or not result.significant for s in result.sizes)
    assert result.significant or result.best == result.original
    assert all(s.sol_floor_us and 0 < s.pct_of_sol <= 110 for s in result.sizes)  # type: ignore[operator]
    stored = read_result(stored_result_path(options, job))
    assert stored.best == result.best and stored.sizes[0].original.median_us > 0
