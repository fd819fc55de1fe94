"""The autotune and agent use cases on real recorded H200 measurements (the replay backend): backend choice,
variants, storage, and refusals before anything is measured."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cutune.agent.record import StepRecord
from cutune.agent.settings import AgentSettings
from cutune.agent.steps import LoopOptions
from cutune.errors import CutuneError, NoGpuError
from cutune.gpu.backend import TimingOptions
from cutune.gpu.device import gpu_available
from cutune.project import KernelContext, open_kernel, stored_result
from cutune.template.model import PDL
from cutune.workflow import (
    AgentRequest,
    BackendChoice,
    Hooks,
    TuneRequest,
    agent_autotune,
    autotune,
    backend_ref,
    prepare,
)

ROOT = Path(__file__).resolve().parents[2]
RECORDING = ROOT / "benchmarks" / "results" / "recordings" / "silu_and_mul.tune.NVIDIA-H200.2026-11-21.jsonl"
REPLAY = BackendChoice("replay", RECORDING)
NO_GPU = pytest.mark.skipif(gpu_available(), reason="this is what happens without a GPU")


@pytest.fixture
def silu(tmp_path: Path) -> KernelContext:
    """The silu_and_mul sample in a throwaway workspace (its results and studies land there)."""
    (tmp_path / ".cutune").mkdir()
    for name in ("silu_and_mul.cu", "silu_and_mul.tune.toml"):
        shutil.copy(ROOT / "samples" / name, tmp_path)
    return open_kernel(tmp_path / "silu_and_mul.cu", "silu_and_mul_kernel")


def test_autotune_replays_a_recorded_search_and_stores_the_result(silu: KernelContext) -> None:
    seen: list[int] = []
    tuned = autotune(silu, TuneRequest(trials=20, backend=REPLAY), Hooks(progress=lambda p: seen.append(p.done)))
    result = tuned.result
    assert result.replayed is not None and result.replayed.label().startswith(f"replayed from {RECORDING.name}")
    assert result.trials == 20 and seen and max(seen) == 20
    # the recording's space has no VARIANT: replaying searches what it measured, and stores no variants
    assert tuned.prepared.combined is None and tuned.variants == () and not tuned.cancelled
    stored = stored_result(silu)
    assert stored is not None and stored.study == result.study and stored.speedup == result.speedup
    again = autotune(silu, TuneRequest(trials=30, backend=REPLAY))  # the same study, resumed
    assert again.result.study == result.study and again.result.trials == 30


def test_backend_options_reach_the_backends_whose_constructors_take_them() -> None:
    choice = BackendChoice("replay", RECORDING, pace_s=0.5, compiler="nvcc")
    assert backend_ref(choice).options == {"path": str(RECORDING), "pace_s": 0.5}
    measured = backend_ref(BackendChoice("auto", RECORDING, compiler="nvcc"))
    assert measured.name == "cupy" and measured.options == {"compiler": "nvcc"}  # `auto`: the first that measures


def test_a_replaying_backend_needs_a_recording_and_says_how_to_name_one(silu: KernelContext, tmp_path: Path) -> None:
    with pytest.raises(CutuneError, match=r"the replay backend replays a recording: name one with --replay FILE"):
        prepare(silu, TuneRequest(backend=BackendChoice("replay")))
    missing = BackendChoice("replay", tmp_path / "nowhere.jsonl", recording_hint="the `cutune.replayFile` setting")
    with pytest.raises(CutuneError, match=r"^no recording at .*nowhere\.jsonl \(the `cutune\.replayFile` setting\)$"):
        prepare(silu, TuneRequest(backend=missing))


def test_a_spec_error_comes_before_the_backend(tmp_path: Path) -> None:
    shutil.copy(ROOT / "samples" / "silu_and_mul.cu", tmp_path)  # no spec beside it
    ctx = open_kernel(tmp_path / "silu_and_mul.cu", "silu_and_mul_kernel")
    with pytest.raises(CutuneError, match="no tuning spec for kernel 'silu_and_mul_kernel'"):
        autotune(ctx, TuneRequest(backend=BackendChoice("replay")))


@NO_GPU
def test_without_a_gpu_autotune_refuses_and_prepare_says_why(silu: KernelContext) -> None:
    with pytest.raises(NoGpuError, match=r"^measured tuning needs a CUDA GPU; run `cutune check`"):
        autotune(silu, TuneRequest())
    prepared = prepare(silu, TuneRequest(), require_device=False)
    assert prepared.unavailable == "measured tuning needs a CUDA GPU"
    assert prepared.combined is not None and prepared.combined.variants  # the compile-only check searches them
    with pytest.raises(NoGpuError):
        agent_autotune(silu, AgentRequest(AgentSettings(), LoopOptions(max_steps=1)))


def test_the_agent_runs_on_recorded_measurements_and_rejects_what_they_lack(silu: KernelContext) -> None:
    """The recording holds the original's space only: the step's variant is rejected with the reason."""
    steps: list[StepRecord] = []
    request = AgentRequest(AgentSettings(), LoopOptions(max_steps=1, trials=8, target_pct=101.0), backend=REPLAY)
    run = agent_autotune(silu, request, Hooks(on_step=steps.append))
    assert run.result is not None and run.result.replayed is not None
    assert len(run.records) == len(steps) == 1 and run.kept == ()
    assert "this recording does not match silu_and_mul_kernel: the tuning space differs" in steps[0].reason
    assert stored_result(silu) is not None


def test_graph_timing_searches_pdl_and_events_timing_or_a_replay_without_it_does_not(silu: KernelContext) -> None:
    graph = TimingOptions(mode="graph")
    measured = prepare(silu, TuneRequest(timing=graph), require_device=False)
    events = prepare(silu, TuneRequest(), require_device=False)
    replayed = prepare(silu, TuneRequest(backend=REPLAY, timing=graph), require_device=False)  # recorded without
    assert measured.context.space.params[-1].name == PDL
    assert all(PDL not in {p.name for p in x.context.space.params} for x in (events, replayed))


@pytest.mark.parametrize("probe", [True, False])
def test_the_requests_probe_switch_reaches_the_search(
    silu: KernelContext, probe: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO", logger="cutune.tune.search"):
        autotune(silu, TuneRequest(trials=20, backend=REPLAY, probe=probe))
    rounds = [r for r in caplog.records if r.getMessage().startswith("probing")]
    assert bool(rounds) is probe
