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
