"""The autotune use case on a real GPU: the default backend measures, in its isolated worker, and the result
and variants are stored (skipped without a CUDA GPU)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cutune.gpu.backend import TimingOptions
from cutune.project import open_kernel, stored_result
from cutune.workflow import TuneRequest, autotune, prepare

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.gpu
def test_autotune_measures_a_sample_with_its_variants_on_the_gpu(tmp_path: Path) -> None:
    (tmp_path / ".cutune").mkdir()
    for name in ("silu_and_mul.cu", "silu_and_mul.tune.toml"):
        shutil.copy(ROOT / "samples" / name, tmp_path)
    ctx = open_kernel(tmp_path / "silu_and_mul.cu", "silu_and_mul_kernel")
    request = TuneRequest(trials=10, seconds=40, timing=TimingOptions(reps=5, min_time_ms=1.0, max_reps=50))
    assert prepare(ctx, request).unavailable is None
    tuned = autotune(ctx, request)
    result = tuned.result
    assert result.replayed is None and result.backend == "cupy" and result.device
    assert result.trials >= 1 and all(s.speedup > 0 for s in result.sizes)
    assert tuned.prepared.combined is not None and tuned.variants  # measuring searches the variants
    stored = stored_result(ctx)
    assert stored is not None and stored.study == result.study
