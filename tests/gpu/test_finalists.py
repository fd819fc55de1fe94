"""The last checks before a configuration may win, through a scripted backend (tests/gpu/mock_backend.py)."""

from __future__ import annotations

import pytest

from cutune.gpu.backend import Failure
from cutune.gpu.finalists import first_finding, recheck, sanitizer_enabled, verify_seeds
from cutune.gpu.replay import ReplayBackend
from cutune.template.model import Config
from tests.gpu.jobs import tiny_job
from tests.gpu.mock_backend import MODES, ScriptedBackend


def mode(name: str) -> Config:
    return Config.of({"mode": name})


def opened() -> ScriptedBackend:
    backend = ScriptedBackend()
    backend.open(tiny_job({"mode": MODES}))
    return backend


def test_fresh_seeds_differ_from_the_job_seed_and_from_worker_restarts() -> None:
    seeds = verify_seeds(0, 3)
    assert len(set(seeds)) == 3 and all(s > 100 for s in seeds)
    assert verify_seeds(5, 2)[0] != seeds[0]


def test_a_finalist_that_fails_a_recheck_is_dropped_with_its_reason_mock_backend() -> None:
    kept, rejected = recheck(opened(), [mode("ok"), mode("flaky")], 3, 0)
    assert kept == (mode("ok"),)
    assert [(c.config, c.failure) for c in rejected] == [(mode("flaky"), Failure.RACE)]
    assert rejected[0].detail == f"planted race, seed {verify_seeds(0, 1)[0]}"
    assert recheck(opened(), [mode("flaky")], 0, 0) == ((mode("flaky"),), ())  # re-checks switched off


def test_a_backend_that_runs_no_kernels_keeps_every_finalist() -> None:
    replay = ReplayBackend.__new__(ReplayBackend)  # verify is the base class's: nothing to re-run
    assert replay.verify(mode("flaky"), 1) is None
    kept, rejected = recheck(replay, [mode("flaky")], 3, 0)
    assert kept == (mode("flaky"),) and rejected == ()


def test_the_first_sanitizer_finding_rejects_its_winner_mock_backend() -> None:
    found = first_finding(opened(), [mode("ok"), mode("flaky"), mode("ok")])
    assert found is not None and found.config == mode("flaky") and found.failure is Failure.OUT_OF_BOUNDS
    assert first_finding(opened(), [mode("ok")]) is None


def test_sanitize_option_defaults_to_the_tool_being_there(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sanitizer_enabled(True) and not sanitizer_enabled(False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert not sanitizer_enabled(None)
