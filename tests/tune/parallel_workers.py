"""Helpers of the parallel-worker tests: real `cutune` processes replaying the recorded H200 sweep of a sample."""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from cutune.tune.study import FAILURE, WORKER, read_record

ROOT = Path(__file__).resolve().parents[2]
RECORDING = ROOT / "benchmarks" / "results" / "recordings" / "silu_and_mul.tune.NVIDIA-H200.2026-11-21.jsonl"
KERNEL = "silu_and_mul_kernel"
FEASIBLE = 60  # the recorded spec's space: 5 block sizes × 2 × 2 × 3, all feasible on the H200


def workspace(tmp_path: Path) -> Path:
    """The sample with the spec its recording was made with, in a throwaway folder."""
    shutil.copy(ROOT / "samples" / "silu_and_mul.cu", tmp_path)
    shutil.copy(ROOT / "tests" / "data" / "gpu" / "recorded_specs" / "silu_and_mul.tune.toml", tmp_path)
    return tmp_path / "silu_and_mul.cu"


def cutune(*args: str | Path, log: Path) -> subprocess.Popen[bytes]:
    """A `cutune` command line in its own process, its output in `log`."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "cutune", *map(str, args)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "COLUMNS": "200"},
        )


def tune_args(source: Path, storage: str, *, trials: int, pace: float, grace: float = 60.0) -> list[str | Path]:
    """`cutune tune` replaying the recording into `storage`."""
    return [
        "tune",
        source,
        "-k",
        KERNEL,
        "--no-variants",
        "--backend",
        "replay",
        "--replay",
        RECORDING,
        "--replay-pace",
        str(pace),
        "--trials",
        str(trials),
        "--storage",
        storage,
        "--grace",
        str(grace),
    ]


def worker_args(storage: str, *, pace: float) -> list[str | Path]:
    """`cutune worker` replaying the recording."""
    return ["worker", "--storage", storage, "--backend", "replay", "--replay", RECORDING, "--replay-pace", str(pace)]


def wait_for(what: str, condition: Callable[[], bool], timeout_s: float = 120.0) -> None:
    """Poll until `condition` holds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def finish(proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 180.0) -> str:
    """Wait for a process; its output, asserting it succeeded."""
    code = proc.wait(timeout_s)
    text = log.read_text(errors="replace")
    assert code == 0, text
    return text


def the_study(storage: str) -> optuna.Study:
    """The only study in `storage`, read with Optuna itself."""
    from cutune.tune.study import load_study

    return load_study(storage)


def measured_trials(study: optuna.Study) -> list[FrozenTrial]:
    """Trials whose configuration reached a backend during the search (finished with a record)."""
    found = []
    for t in study.get_trials(deepcopy=False):
        record = read_record(t)
        if record is not None and record.measured:
            found.append(t)
    return found


def duplicates(trials: list[FrozenTrial]) -> dict[str, int]:
    """Configurations measured more than once."""
    counts = collections.Counter(str(sorted(t.params.items())) for t in trials)
    return {k: n for k, n in counts.items() if n > 1}


def workers_of(trials: list[FrozenTrial]) -> set[str]:
    """The workers that measured these trials."""
    return {t.user_attrs.get(WORKER, "") for t in trials}


def interrupted(trial: FrozenTrial) -> bool:
    """A trial whose worker died mid-measurement: failed without a failure reason."""
    return trial.state == TrialState.FAIL and FAILURE not in trial.user_attrs and "yielded_to" not in trial.user_attrs
