"""Replayed runs through the command line: byte-for-byte reproducible, and within their whole-run budget."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cutune.cli import app

ROOT = Path(__file__).resolve().parents[2]
RECORDING = ROOT / "benchmarks" / "results" / "recordings" / "silu_and_mul.tune.NVIDIA-H200.2026-11-21.jsonl"
runner = CliRunner()


def replay(folder: Path, *extra: str) -> tuple[bytes, float]:
    """One `cutune tune` of the silu sample on its recording, in a fresh study; the result file and wall time."""
    shutil.rmtree(folder / ".cutune", ignore_errors=True)
    out = folder / "result.json"
    began = time.monotonic()
    res = runner.invoke(
        app,
        [
            "tune",
            str(folder / "silu_and_mul.cu"),
            "-k",
            "silu_and_mul_kernel",
            "--backend",
            "replay",
            "--replay",
            str(RECORDING),
            "-o",
            str(out),
            *extra,
        ],
    )
    assert res.exit_code == 0, res.output
    return out.read_bytes(), time.monotonic() - began


def sample(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "samples" / "silu_and_mul.cu", tmp_path)
    shutil.copy(ROOT / "tests" / "data" / "gpu" / "recorded_specs" / "silu_and_mul.tune.toml", tmp_path)
    (tmp_path / ".git").mkdir()  # the workspace root: studies and results stay in this folder
    return tmp_path


def test_the_same_replay_twice_gives_the_same_result_json_byte_for_byte(tmp_path: Path) -> None:
    folder = sample(tmp_path)
    # paced, with a time budget that cuts the search short: time decisions come from the replay's clock
    paced = ("--replay-pace", "0.01", "--seconds", "0.75")
    first, _ = replay(folder, *paced)
    second, _ = replay(folder, *paced)
    assert first == second
    result = json.loads(first)
    assert result["stop"] == "time" and result["date"].startswith("2026-11-21")  # the recording's date
    assert result["phases"]["search"] == pytest.approx(0.01 * result["trials"]) and result["trials"] > 1


def test_a_paced_replay_ends_within_its_budget_and_stores_a_verified_result(tmp_path: Path) -> None:
    folder = sample(tmp_path)
    budget = 1.5
    data, wall = replay(folder, "--replay-pace", "0.02", "--seconds", str(budget))
    result = json.loads(data)
    assert sum(result["phases"].values()) <= budget * 1.1  # the replayed time: search, selection, held-out
    # the host's own work (parsing, Optuna, the journal) comes on top of the paced measurements
    assert wall < budget * 1.1 + 10.0
    assert result["stop"] == "time" and any(s["significant"] for s in result["sizes"])
    stored = folder / ".cutune" / "results"
    assert any(stored.rglob("*.json"))  # stored before the run ended


def test_the_report_says_which_timing_produced_it_and_a_replay_keeps_its_own(tmp_path: Path) -> None:
    folder = sample(tmp_path)
    command = ["tune", str(folder / "silu_and_mul.cu"), "-k", "silu_and_mul_kernel", "--backend", "replay"]
    res = runner.invoke(app, [*command, "--replay", str(RECORDING)])
    assert res.exit_code == 0, res.output
    assert "timing: events around single launches" in " ".join(res.output.split())
    graph = runner.invoke(app, [*command, "--replay", str(RECORDING), "--timing", "graph"])
    assert graph.exit_code != 0 and "it was timed with events timing, not graph" in " ".join(graph.output.split())
    bad = runner.invoke(app, [*command, "--replay", str(RECORDING), "--timing", "graphs"])
    assert bad.exit_code == 2 and "unknown timing 'graphs'" in bad.output
