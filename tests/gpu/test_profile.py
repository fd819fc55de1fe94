"""Nsight Compute counters: the raw CSV table read for real, and ncu itself on a GPU (skipped without one)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cutune.gpu.backend import TimingOptions
from cutune.gpu.profile import (
    DRAM,
    INSTRUCTIONS,
    ISSUE,
    L2_HIT,
    OCCUPANCY,
    REGISTERS,
    Profile,
    ProfileError,
    failure_text,
    ncu_command,
    parse_ncu_csv,
    profile_config,
    top_stalls,
)
from cutune.project import build_job, open_kernel
from cutune.template.model import Config

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"

STALLS = ("long_scoreboard", "barrier", "wait", "lg_throttle", "long_scoreboard_not_issued")
HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size"]
HEADER += ["Grid Size", "Device", "CC", DRAM, L2_HIT, REGISTERS, OCCUPANCY, "gpu__time_duration.sum"]
HEADER += [ISSUE, INSTRUCTIONS, *(STALL.format(s) for s in STALLS)]
UNITS = [""] * 11 + ["%", "%", "register/thread", "%", "ns", "%", "inst"] + ["inst"] * len(STALLS)
LAUNCH = ["4242", "python3.12", "127.0.0.1", "silu_and_mul_kernel", "1", "7"]
FIRST = ["0", *LAUNCH, "(1024, 1, 1)", "(16, 1, 1)", "0", "9.0", "12.5", "40.1", "28", "71.0", "4,100"]
FIRST += ["20.0", "1,000", "3.1", "0.4", "1.2", "0.2", "9.9"]
LAST = ["1", *LAUNCH, "(256, 1, 1)", "(4096, 1, 1)", "0", "9.0", "88.4", "33.7", "32", "84.6", "52,318"]
LAST += ["61.5", "2,097,152", "11.3", "0.6", "1.9", "2.4", "20.0"]


def _row(cells: list[str]) -> str:
    return ",".join(f'"{c}"' for c in cells)


# the shape of `ncu --csv --page raw --print-units base`: a header row, a units row, one row per launch
RAW_CSV = "\n".join(
    [
        "==PROF== Connected to process 4242 (/usr/bin/python3.12)",
        '==PROF== Profiling "silu_and_mul_kernel": 0%....50%....100% - 9 passes',
        *map(_row, [HEADER, UNITS, FIRST, LAST]),
        "==PROF== Disconnected from process 4242",
    ]
)


def test_the_last_launch_of_the_raw_csv_is_read_with_its_units_stripped() -> None:
    metrics = parse_ncu_csv(RAW_CSV, "silu_and_mul_kernel")
    assert metrics[DRAM] == 88.4 and metrics[L2_HIT] == 33.7 and metrics[OCCUPANCY] == 84.6
    assert metrics[REGISTERS] == 32 and metrics["gpu__time_duration.sum"] == 52318.0  # thousands separator
    assert metrics[ISSUE] == 61.5 and metrics[INSTRUCTIONS] == 2097152.0
    assert top_stalls(metrics) == (("long_scoreboard", 11.3), ("lg_throttle", 2.4), ("wait", 1.9))


def test_no_profiled_launch_is_an_error_saying_so() -> None:
    with pytest.raises(ProfileError, match="profiled no launch of k"):
        parse_ncu_csv("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n", "k")


def test_the_command_asks_for_every_counter_of_the_kernel_as_raw_csv() -> None:
    command = ncu_command("/opt/ncu", "rms_norm_kernel", ["python3", "-m", "cutune.gpu.profile", "job"])
    assert command[:7] == ["/opt/ncu", "--csv", "--page", "raw", "--print-units", "base", "--kernel-name"]
    assert "rms_norm_kernel" in command[7]
    metrics = command[command.index("--metrics") + 1].split(",")
    assert {DRAM, L2_HIT, OCCUPANCY, REGISTERS} <= set(metrics)
    assert any(m.startswith("regex:^smsp__average_warps_issue_stalled_") for m in metrics)
    # asked by exact-match patterns: an ncu without one of them leaves it out instead of failing the whole run
    assert "regex:^smsp__issue_active[.]avg[.]pct_of_peak_sustained_active$" in metrics
    assert command[-4:] == ["python3", "-m", "cutune.gpu.profile", "job"]


def test_a_profile_round_trips_through_json_and_renders_its_counters() -> None:
    ctx = open_kernel(SAMPLES / "silu_and_mul.cu", "silu_and_mul_kernel")
    profile = Profile(
        ctx.space.default(), {"num_tokens": 4096}, 88.4, 84.6, 33.7, 32, 52.3, (("long_scoreboard", 11.3),), 61.5, 2e6
    )
    assert Profile.from_dict(profile.to_dict()) == profile
    text = profile.render()
    assert "DRAM throughput 88.4%" in text and "achieved occupancy 84.6%" in text and "long_scoreboard 11.30" in text
    assert "issue slots busy 61.5%" in text
    older = {k: v for k, v in profile.to_dict().items() if k not in ("issue_pct", "instructions")}
    assert Profile.from_dict(older).issue_pct is None  # a profile stored before these counters still reads


def test_without_ncu_on_path_profiling_says_so(tmp_path: Path) -> None:
    ctx = open_kernel(SAMPLES / "silu_and_mul.cu", "silu_and_mul_kernel")
    with pytest.raises(ProfileError, match="not on PATH"):
        profile_config(build_job(ctx), ctx.space.default(), backend="cupy", options={}, ncu=str(tmp_path / "no-ncu"))


@pytest.mark.gpu
def test_ncu_reads_the_counters_of_a_sample_configuration() -> None:
    if shutil.which("ncu") is None:
        pytest.skip("ncu is not on PATH")
    ctx = open_kernel(SAMPLES / "silu_and_mul.cu", "silu_and_mul_kernel")
    job = build_job(ctx, timing=TimingOptions(warmup=0, reps=1, min_time_ms=0.0))
    profile = profile_config(job, ctx.space.default(), backend="cupy", options={})
    assert profile.dram_pct is not None and 0 < profile.dram_pct <= 100
    assert profile.occupancy_pct is not None and 0 < profile.occupancy_pct <= 100
    assert profile.l2_hit_pct is not None and profile.registers and profile.registers > 0
    assert profile.stalls and all(value >= 0 for _, value in profile.stalls)
    assert profile.issue_pct is not None and 0 < profile.issue_pct <= 100
    assert profile.instructions is not None and profile.instructions > 0


@pytest.mark.gpu
def test_a_profile_measures_no_speed_of_light_under_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # under ncu every launch is serialised and profiled: a floor timed there (an empty launch of tens of µs) and
    # cached made every later % of the floor on the machine wrong (found on an H200, 2026-11-28)
    if shutil.which("ncu") is None:
        pytest.skip("ncu is not on PATH")
    monkeypatch.setenv("CUTUNE_CACHE_DIR", str(tmp_path))  # the child inherits it: a cache of its own, empty
    ctx = open_kernel(SAMPLES / "silu_and_mul.cu", "silu_and_mul_kernel")
    job = build_job(ctx, timing=TimingOptions(warmup=0, reps=1, min_time_ms=0.0))
    assert profile_config(job, ctx.space.default(), backend="cupy", options={}).duration_us
    assert not list(tmp_path.glob("sol/*.json"))


def test_a_failed_ncu_run_reports_its_messages_not_its_table() -> None:
    out = RAW_CSV + "\n==ERROR== LaunchFailed: the kernel faulted\n"
    done = subprocess.CompletedProcess(["ncu"], 9, out, "the launcher: FAULT: illegal address\n")
    text = failure_text(done)
    assert "==ERROR== LaunchFailed" in text and "illegal address" in text
    assert "silu_and_mul_kernel" not in text and "==PROF==" not in text  # the table and progress lines left out


@pytest.mark.parametrize(
    ("dram", "issue", "bound"),
    [
        (88.0, 40.0, "memory-bound"),  # a streaming kernel near the floor
        (27.0, 89.6, "instruction-bound"),  # quantize_q8_1's group_items on an H200
        (49.8, 55.8, "latency-bound"),  # k_set_rows' flat_rows there: long_scoreboard stalls on top
        (65.0, 65.0, None),  # neither clearly
        (40.0, None, None),  # an ncu without the issue counter: no verdict
    ],
)
def test_the_profile_says_what_bounds_the_launch(dram: float, issue: float | None, bound: str | None) -> None:
    profile = Profile(Config.of({}), {"n": 1}, dram, 50.0, 10.0, 32, 1.0, (), issue, None)
    said = profile.bound()
    if bound is None:
        assert said is None and "-bound" not in profile.render()
    else:
        assert said is not None and said.startswith(bound) and said in profile.render()
