"""Planted wrong templates (tests/data/gpu/wrong/wrong.cu) on a real GPU: each is rejected with a reason
naming its class, the right template in the same file is still tuned, and compute-sanitizer finds what
it should. A CPU test compiles every planted configuration with nvcc."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cutune.check import check_kernel
from cutune.gpu.backend import Failure, Job
from cutune.gpu.cupy_backend import CupyBackend
from cutune.gpu.finalists import verify_seeds
from cutune.gpu.sanitize import sanitize_job, sanitizer_path
from cutune.project import open_kernel
from cutune.template.model import Config
from cutune.tune.options import Budget, TuneOptions
from cutune.tune.run import tune
from tests.gpu.test_cupy_backend import job_as_written

ROOT = Path(__file__).resolve().parents[2]
WRONG = ROOT / "tests/data/gpu/wrong/wrong.cu"
RIGHT, PLANTED = Config.of({"MODE": 0}), Config.of({"MODE": 1})
EXPECTED = {
    "tail_kernel": {Failure.UNWRITTEN},  # the tail stays poisoned at the ragged sizes
    "inplace_kernel": {Failure.UNWRITTEN},  # the residual still holds its input
    "barrier_kernel": {Failure.WRONG, Failure.RACE},  # stale shared memory: wrong, and often not the same twice
    "accumulate_kernel": {Failure.WRONG},
    "bounds_kernel": {Failure.OUT_OF_BOUNDS},  # every element right; the guard after `out` is not
    "vector_kernel": {Failure.UNWRITTEN},  # right at the round sizes, not at the ragged ones
    "input_kernel": {Failure.INPUT_WRITTEN},
    "race_kernel": {Failure.RACE},
}
CLASS_NAMES = {
    Failure.UNWRITTEN: "not written",
    Failure.OUT_OF_BOUNDS: "written after its end",
    Failure.INPUT_WRITTEN: "wrote into an input",
    Failure.RACE: "on the same inputs",
    Failure.WRONG: "elements differ",
}

CUPY: dict[str, Any] = {"backend": "cupy", "options": {}}  # the child builds this backend


def wrong_job(kernel: str) -> Job:
    return job_as_written(WRONG, kernel)


@pytest.mark.parametrize("kernel", sorted(EXPECTED))
@pytest.mark.gpu
def test_each_planted_template_is_rejected_with_its_class(kernel: str) -> None:
    backend = CupyBackend()
    backend.open(wrong_job(kernel))
    try:
        assert backend.evaluate(RIGHT).ok
        m = backend.evaluate(PLANTED)
        failure, detail = m.failure, m.detail
        if failure is None:  # passed its one check: the finalists' re-checks on fresh inputs must catch it
            for seed in verify_seeds(0, 5):
                check = backend.verify(PLANTED, seed)
                if not check.ok:
                    failure, detail = check.failure, check.detail
                    break
        print(f"\n{kernel}: {failure.value if failure else 'ACCEPTED'}: {detail}")
        assert failure in EXPECTED[kernel], detail
        assert CLASS_NAMES[failure] in detail
        assert backend.verify(RIGHT, verify_seeds(0, 1)[0]).ok  # the original passes its own re-check
    finally:
        backend.close()


@pytest.mark.gpu
def test_the_race_never_wins_a_tuning_run(tmp_path: Path) -> None:
    options = TuneOptions(workspace=tmp_path, budget=Budget(trials=2), sanitize=False)
    result = tune(wrong_job("race_kernel"), CupyBackend(), options)
    print(f"\nrace_kernel tuned: best {result.best}, failures {result.failures}")
    assert result.best == RIGHT and not result.significant
    assert result.failures.get("race", 0) + result.failures.get("wrong", 0) == 1


@pytest.mark.gpu
def test_the_right_template_is_still_tuned(tmp_path: Path) -> None:
    options = TuneOptions(workspace=tmp_path, budget=Budget(trials=9))
    result = tune(wrong_job("right_kernel"), CupyBackend(), options)
    print(f"\nright_kernel tuned: best {result.best} {result.speedup:.2f}x, failures {result.failures}")
    assert result.trials == 9 and result.failures == {}
    assert all(s.original.median_us > 0 and s.tuned.median_us > 0 for s in result.sizes)


@pytest.mark.gpu
@pytest.mark.skipif(sanitizer_path() is None, reason="compute-sanitizer is not on PATH")
def test_compute_sanitizer_sees_the_overrun_and_the_missing_barrier() -> None:
    [overrun, right] = sanitize_job(wrong_job("bounds_kernel"), [PLANTED, RIGHT], tools=("memcheck",), **CUPY) or ()
    print(f"\nbounds_kernel under memcheck: {overrun}")
    assert overrun.failure is Failure.OUT_OF_BOUNDS and "Invalid __global__ write" in overrun.detail
    assert right.ok and "no error" in right.detail, right
    [hazard] = sanitize_job(wrong_job("barrier_kernel"), [PLANTED], tools=("racecheck",), **CUPY) or ()
    print(f"barrier_kernel under racecheck: {hazard}")
    assert hazard.failure is Failure.RACE
    [clean] = sanitize_job(wrong_job("right_kernel"), [Config.of({"VEC": 4, "THREADS": 128})], **CUPY) or ()
    assert clean.ok and "no error" in clean.detail, clean


# `std::lgamma` comes from the host <cmath>, which NVRTC lacks (CCCL maps `<type_traits>` and the like: no refusal)
NVRTC_REFUSES = r"""
#include <cmath>
__device__ float twice_log_gamma(float v) { return 2 * std::lgamma(v); }
template <int MODE>
__global__ void k(float* out, const float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = twice_log_gamma(x[i]);
}
"""


@pytest.mark.gpu
def test_auto_falls_back_to_nvcc_and_says_why(tmp_path: Path) -> None:
    source = tmp_path / "traits.cu"
    source.write_text(NVRTC_REFUSES)
    text = WRONG.with_suffix(".tune.toml").read_text()  # one thread per element, as accumulate_kernel
    spec = text[text.index("[kernel.accumulate_kernel]") : text.index("[kernel.bounds_kernel]")]
    (tmp_path / "traits.tune.toml").write_text(spec.replace("accumulate_kernel", "k"))
    backend = CupyBackend(compiler="auto")
    backend.open(job_as_written(source, "k"))
    try:
        m = backend.evaluate(RIGHT)
        assert m.ok and m.compile is not None, m.detail
        print(f"\ncompiled with {m.compile.compiler}: {m.compile.fallback[:200]}")
        assert m.compile.compiler == "nvcc" and m.compile.fallback.startswith("NVRTC could not compile the unit")
        assert backend.nvrtc_failed
    finally:
        backend.close()


@pytest.mark.nvcc
@pytest.mark.parametrize("kernel", [*sorted(EXPECTED), "right_kernel"])
def test_every_planted_configuration_compiles_with_nvcc(kernel: str, tmp_path: Path) -> None:
    ctx = open_kernel(WRONG, kernel)
    report = check_kernel(ctx, arch="sm_90", limit=16, jobs=2, cache_dir=tmp_path)
    assert len(report.rows) == ctx.space.size()
    failed = [(r.config, r.problem) for r in report.rows if r.usage is None]
    assert not failed, failed
