"""The tune report: a cancelled search gives no verdict it has not earned."""

from __future__ import annotations

import threading
from pathlib import Path

from rich.console import Console

from cutune.cli_render.tune import render_result
from cutune.tune import Budget, TuneOptions, tune
from cutune.tune.options import SearchOptions
from tests.tune.fake_backend import FakeBackend, make_job


def test_a_cancelled_tune_claims_no_verdict(tmp_path: Path) -> None:
    cancel = threading.Event()
    options = TuneOptions(workspace=tmp_path, budget=Budget(trials=100), search=SearchOptions(seed=1))
    result = tune(make_job(), FakeBackend(cancel_after=(8, cancel)), options, cancel=cancel)
    assert result.stop == "cancelled"
    console = Console(width=160, record=True)
    console.print(render_result(result))
    text = console.export_text()
    assert "no significant gain" not in text and "keeping it" not in text
    assert "stopped before any configuration was verified: no verdict" in text


def test_a_run_reports_the_configurations_it_measured_itself(tmp_path: Path) -> None:
    # a study others measured in too (earlier here; tests/tune/test_parallel.py races workers at once)
    cancel = threading.Event()
    options = TuneOptions(workspace=tmp_path, budget=Budget(trials=100), search=SearchOptions(seed=1))
    tune(make_job(), FakeBackend(cancel_after=(8, cancel)), options, cancel=cancel)
    result = tune(make_job(), FakeBackend(), options)
    console = Console(width=200, record=True)
    console.print(render_result(result))
    text = console.export_text()
    assert f"{result.trials} configurations measured in " in text
    assert f", {result.trials - 8} of them by this run, 8 by earlier runs (" in text
