from __future__ import annotations

from collections.abc import Mapping

import pytest

from cutune.errors import StudyError
from cutune.gpu.backend import Failure
from cutune.template.model import Config
from cutune.tune.options import SelectionOptions
from cutune.tune.select import Verdict, select
from tests.tune.fake_backend import SPACE, FakeBackend, make_job, table_time

ORIGINAL = SPACE.default()
FAST = Config.of({"THREADS": 256, "VEC": 4, "UNROLL": 1})  # 0.78× at both sizes in the table
NEARLY = Config.of({"THREADS": 512, "VEC": 1, "UNROLL": 1})  # 0.99×
SMALL_ONLY = Config.of({"THREADS": 128, "VEC": 1, "UNROLL": 1})
LARGE_ONLY = Config.of({"THREADS": 64, "VEC": 1, "UNROLL": 1})


def opened(backend: FakeBackend) -> FakeBackend:
    backend.open(make_job())
    return backend


def test_verdict_needs_a_gain_beyond_the_spread() -> None:
    assert Verdict.of([0.80, 0.81, 0.79, 0.80, 0.82]).significant
    assert not Verdict.of([0.97, 1.02, 0.99, 1.01, 0.96]).significant
    assert not Verdict.of([1.05, 1.05, 1.05]).significant


def test_picks_a_clearly_faster_config() -> None:
    backend = opened(FakeBackend(noise=0.01))
    selection = select(backend, ORIGINAL, [NEARLY, FAST], SelectionOptions(rounds=5))
    assert selection is not None and selection.best is not None
    assert selection.best.config == FAST
    assert selection.best.overall.ratio == pytest.approx(0.78, abs=0.02)
    # interleaved: A c A c A per round, the original around every candidate
    calls = backend.calls
    assert len(calls) == 5 * 5
    rounds = [calls[i : i + 5] for i in range(0, 25, 5)]
    assert all(c == ORIGINAL for r in rounds for c in r[0::2])  # A c A c A
    assert [r[1] for r in rounds] == [NEARLY, FAST, NEARLY, FAST, NEARLY]  # the order rotates
    assert calls.count(FAST) == calls.count(NEARLY) == 5
    assert [t.reps for t in selection.original_timings] == [1500, 1500]  # 15 original runs × 100


def test_refuses_a_gain_within_the_noise() -> None:
    backend = opened(FakeBackend(noise=0.02, seed=3))
    selection = select(backend, ORIGINAL, [NEARLY], SelectionOptions(rounds=5))
    assert selection is not None
    assert selection.best is None  # 1% faster in the table, but the run-to-run spread is larger
    assert selection.best_for_size(0) is None and selection.best_for_size(1) is None


def test_keeps_the_best_config_per_size() -> None:
    def time_of(config: Config, size: Mapping[str, int]) -> float:
        small = size["N"] == 1 << 20
        gain = {SMALL_ONLY: 0.8 if small else 1.1, LARGE_ONLY: 1.1 if small else 0.8}.get(config, 1.0)
        return table_time(ORIGINAL, size) * gain

    backend = opened(FakeBackend(noise=0.005, time_of=time_of))
    selection = select(backend, ORIGINAL, [SMALL_ONLY, LARGE_ONLY], SelectionOptions(rounds=4))
    assert selection is not None
    best_small, best_large = selection.best_for_size(0), selection.best_for_size(1)
    assert best_small is not None and best_small.config == SMALL_ONLY
    assert best_large is not None and best_large.config == LARGE_ONLY
    assert selection.best is not None  # 0.8 × 1.1 overall: both ~6% faster on the geometric mean


def test_a_candidate_that_fails_now_is_dropped() -> None:
    backend = opened(FakeBackend(failures={FAST: Failure.WRONG}))
    selection = select(backend, ORIGINAL, [FAST, NEARLY], SelectionOptions(rounds=3))
    assert selection is not None
    assert [c.config for c in selection.contenders] == [NEARLY]
    assert backend.calls.count(FAST) == 1  # not retried in later rounds


def test_the_original_failing_is_an_error() -> None:
    backend = opened(FakeBackend(failures={ORIGINAL: Failure.FAULT}))
    with pytest.raises(StudyError, match="re-measuring"):
        select(backend, ORIGINAL, [FAST], SelectionOptions(rounds=3))


def test_rounds_below_three_are_refused() -> None:
    with pytest.raises(StudyError):
        SelectionOptions(rounds=2)
