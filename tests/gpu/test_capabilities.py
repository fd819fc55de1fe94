"""Backends declare what they can do; wrappers report the backend they wrap; the profiler's and the
sanitizer's child processes build their backend by name and refuse one without the capability."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

from cutune.gpu.backend import Capability
from cutune.gpu.cupy_backend import CupyBackend
from cutune.gpu.registry import resolve_backend
from cutune.gpu.replay import RecordingBackend, ReplayBackend
from cutune.gpu.worker import IsolatedBackend
from cutune.project import build_job, open_kernel

ROOT = Path(__file__).resolve().parents[2]
RECORDING = ROOT / "benchmarks" / "results" / "recordings" / "silu_and_mul.tune.NVIDIA-H200.2026-11-21.jsonl"
EVERYTHING = frozenset(Capability)


def test_each_backend_declares_its_capabilities_and_wrappers_pass_them_on(tmp_path: Path) -> None:
    assert CupyBackend.capabilities == EVERYTHING and ReplayBackend.capabilities == frozenset()
    assert resolve_backend("auto") is CupyBackend  # the first registered backend that measures
    replay = ReplayBackend(RECORDING)
    assert not any(replay.can(c) for c in Capability)
    assert all(IsolatedBackend("cupy").can(c) for c in Capability)
    assert not IsolatedBackend("replay", options={"path": str(RECORDING)}).can(Capability.MEASURE)
    assert not RecordingBackend(replay, tmp_path / "r.jsonl").can(Capability.PROFILE)
    assert RecordingBackend(CupyBackend(), tmp_path / "r.jsonl").can(Capability.SANITIZE)


def test_a_backend_that_runs_no_kernels_has_nothing_to_profile_or_sanitize() -> None:
    ctx = open_kernel(ROOT / "samples" / "silu_and_mul.cu", "silu_and_mul_kernel")
    replay = ReplayBackend(RECORDING)
    assert replay.profile(build_job(ctx), ctx.space.default()) is None
    assert replay.sanitize([ctx.space.default()]) is None


def test_the_profile_launcher_refuses_a_backend_without_the_capability(tmp_path: Path) -> None:
    ctx = open_kernel(ROOT / "samples" / "silu_and_mul.cu", "silu_and_mul_kernel")
    payload = tmp_path / "job.pickle"
    payload.write_bytes(pickle.dumps((build_job(ctx), ctx.space.default(), "replay", {"path": str(RECORDING)})))
    done = subprocess.run(
        [sys.executable, "-m", "cutune.gpu.profile", str(payload)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and "the replay backend cannot be profiled: it runs no kernels" in done.stderr
