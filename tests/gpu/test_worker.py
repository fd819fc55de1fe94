"""Worker isolation: faults, crashes, hangs and backend bugs cost one trial; the next trial runs in a
fresh worker. The worker's backend is a scripted stand-in (tests/gpu/mock_backend.py), so these run
on any machine; tests/gpu/test_cupy_backend.py repeats the fault and hang cases with real kernels."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cutune.errors import CutuneError
from cutune.gpu.backend import DeviceInfo, Failure, Measurement, Timing, TimingOptions
from cutune.gpu.registry import create_backend
from cutune.gpu.replay import header_for
from cutune.gpu.worker import IsolatedBackend
from cutune.template.model import Config
from tests.gpu.jobs import tiny_job
from tests.gpu.mock_backend import MODES

SCRIPTED = "tests.gpu.mock_backend:ScriptedBackend"


def mode(name: str) -> Config:
    return Config.of({"mode": name})


@pytest.fixture
def worker():
    backend = IsolatedBackend(SCRIPTED)
    backend.open(tiny_job({"mode": MODES}, seed=7, timing=TimingOptions(trial_timeout_s=2.0)))
    yield backend
    backend.close()


def test_trials_run_in_one_child_process_mock_backend(worker: IsolatedBackend) -> None:
    first, second = worker.evaluate(mode("ok")), worker.evaluate(mode("ok"))
    assert first.ok and second.ok
    assert first.extra["pid"] == second.extra["pid"] != os.getpid()
    assert first.extra["seed"] == 7
    assert worker.restarts == 0


def test_hang_times_out_and_a_fresh_worker_reopens_the_job_mock_backend(worker: IsolatedBackend) -> None:
    before = worker.evaluate(mode("ok"))
    hung = worker.evaluate(mode("hang"))
    assert hung.failure is Failure.TIMEOUT and "2 s" in hung.detail
    after = worker.evaluate(mode("ok"))
    assert after.ok
    assert after.extra["pid"] != before.extra["pid"]
    assert after.extra["seed"] == 8  # reopened with a new seed: fresh inputs, fresh reference
    assert worker.restarts == 1


def test_crash_is_survived_mock_backend(worker: IsolatedBackend) -> None:
    crashed = worker.evaluate(mode("crash"))
    assert crashed.failure is Failure.CRASH
    assert "SIGSEGV" in crashed.detail
    assert worker.evaluate(mode("ok")).ok


def test_fault_is_reported_and_the_poisoned_worker_replaced_mock_backend(worker: IsolatedBackend) -> None:
    before = worker.evaluate(mode("ok"))
    faulted = worker.evaluate(mode("fault"))
    assert faulted.failure is Failure.FAULT and faulted.detail == "planted fault"
    after = worker.evaluate(mode("ok"))
    assert after.ok and after.extra["pid"] != before.extra["pid"]


def test_backend_exception_becomes_a_crash_mock_backend(worker: IsolatedBackend) -> None:
    failed = worker.evaluate(mode("raise"))
    assert failed.failure is Failure.CRASH
    assert "RuntimeError: planted bug" in failed.detail
    assert worker.evaluate(mode("ok")).ok


def test_prefetch_hints_reach_the_child_mock_backend(worker: IsolatedBackend) -> None:
    worker.prefetch([mode("ok"), mode("ok"), mode("ok")])
    assert worker.evaluate(mode("ok")).extra["prefetched"] == 3


def test_the_sizes_asked_for_reach_the_child_mock_backend(worker: IsolatedBackend) -> None:
    assert worker.evaluate(mode("ok")).extra["sizes asked"] == -1
    assert worker.evaluate(mode("ok"), [0]).extra["sizes asked"] == 1


def test_open_failure_raises_with_the_childs_message_mock_backend() -> None:
    backend = IsolatedBackend(SCRIPTED, options={"fail_open": True})
    with pytest.raises(CutuneError, match="planted open failure"):
        backend.open(tiny_job({"mode": MODES}))
    backend.close()


def test_a_ragged_size_the_original_faults_at_reopens_the_job_assuming_its_multiple_mock_backend() -> None:
    """The child lost its CUDA context: a fresh one opens the job with `multiple_of = { n = 8 }`; a note says why."""
    backend = IsolatedBackend(SCRIPTED, options={"ragged_fault": True})
    try:
        info = backend.open(tiny_job({"mode": MODES}))
        (note,) = info.notes
        assert "ragged size n=1023 (from sizes[0]): fault: planted misaligned address" in note
        assert "`multiple_of = { n = 8 }`" in note
        measured = backend.evaluate(mode("ok"))
        assert measured.ok and measured.extra["multiple"] == 8 and backend.restarts == 0
    finally:
        backend.close()


def test_evaluate_before_open_raises() -> None:
    with pytest.raises(CutuneError, match="open"):
        IsolatedBackend(SCRIPTED).evaluate(mode("ok"))


def test_replay_backend_runs_isolated_like_in_process(tmp_path: Path) -> None:
    job = tiny_job({"threads": (64, 128)})
    info = DeviceInfo(name="NVIDIA H100 80GB HBM3", arch="sm_90", sm_count=132, l2_bytes=50 << 20)
    recorded = Measurement(Config.of({"threads": 64}), timings=(Timing({"n": 1}, 5.0, 4.9, 5.2, 30),))
    path = tmp_path / "rec.jsonl"
    lines = [header_for(job, info), {"type": "measurement", **recorded.to_dict()}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    isolated = create_backend("replay", isolate=True, path=path)
    direct = create_backend("replay", path=path)
    assert isinstance(isolated, IsolatedBackend)
    try:
        assert isolated.open(job) == direct.open(job)
        for threads in (64, 128):
            config = Config.of({"threads": threads})
            assert isolated.evaluate(config) == direct.evaluate(config)
    finally:
        isolated.close()


def test_verify_and_sanitize_run_in_the_child_mock_backend(worker: IsolatedBackend) -> None:
    check = worker.verify(mode("ok"), 17)
    assert check is not None and check.ok and check.detail.startswith("seed 17 in pid ")
    assert str(os.getpid()) not in check.detail
    flaky = worker.verify(mode("flaky"), 3)
    assert flaky is not None and flaky.failure is Failure.RACE and "seed 3" in flaky.detail
    found = worker.sanitize([mode("ok"), mode("flaky")])
    assert found is not None and [c.failure for c in found] == [None, Failure.OUT_OF_BOUNDS]


def test_a_crash_or_fault_while_verifying_fails_the_check_mock_backend(worker: IsolatedBackend) -> None:
    crashed = worker.verify(mode("crash"), 1)
    assert crashed is not None and crashed.failure is Failure.CRASH and "SIGSEGV" in crashed.detail
    faulted = worker.verify(mode("fault"), 1)
    assert faulted is not None and faulted.failure is Failure.FAULT
    after = worker.verify(mode("ok"), 1)
    assert after is not None and after.ok
    assert worker.restarts == 2
