"""Nsight Compute counters: the raw CSV table read for real, and ncu itself on a GPU (skipped without one)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cutune.gpu.backend import TimingOptions
from cutune.gpu.profile import (
    DRAM,
    L2_HIT,
    OCCUPANCY,
    REGISTERS,
    Profile,
    ProfileError,
    ncu_command,
    parse_ncu_csv,
    profile_config,
    top_stalls,
)
from cutune.project import build_job, open_kernel

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"

STALLS = ("long_scoreboard", "barrier", "wait", "lg_throttle", "long_scoreboard_not_issued")
HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size"]
HEADER += ["Grid Size", "Device", "CC", DRAM, L2_HIT, REGISTERS, OCCUPANCY, "gpu__time_duration.sum"]
HEADER += [STALL.format(s) for s in STALLS]
UNITS = [""] * 11 + ["%", "%", "register/thread", "%", "ns"] + ["inst"] * len(STALLS)
LAUNCH = ["4242", "python3.12", "127.0.0.1", "silu_and_mul_kernel", "1", "7"]
FIRST = ["0", *LAUNCH, "(1024, 1, 1)", "(16, 1, 1)", "0", "9.0", "12.5", "40.1", "28", "71.0", "4,100"]
FIRST += ["3.1", "0.4", "1.2", "0.2", "9.9"]
LAST = ["1", *LAUNCH, "(256, 1, 1)", "(4096, 1, 1)", "0", "9.0", "88.4", "33.7", "32", "84.6", "52,318"]
LAST += ["11.3", "0.6", "1.9", "2.4", "20.0"]


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
    assert command[-4:] == ["python3", "-m", "cutune.gpu.profile", "job"]


def test_a_profile_round_trips_through_json_and_renders_its_counters() -> None:
    ctx = open_kernel(SAMPLES / "silu_and_mul.cu", "silu_and_mul_kernel")
    profile = Profile(
        ctx.space.default(), {"num_tokens": 4096}, 88.4, 84.6, 33.7, 32, 52.3, (("long_scoreboard", 11.3),)
    )
    assert Profile.from_dict(profile.to_dict()) == profile
    text = profile.render()
    assert "DRAM throughput 88.4%" in text and "achieved occupancy 84.6%" in text and "long_scoreboard 11.30" in text


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
