"""Off a terminal (piped, logged), a long command still says how far it is."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import cutune.cli
from cutune.cli import app
from tests.test_cli import replay_args, scale_workspace

runner = CliRunner()


def test_a_piped_tune_prints_its_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cutune.cli, "PLAIN_PROGRESS_S", 0.0)  # every update: the run is short
    result = runner.invoke(app, replay_args(scale_workspace(tmp_path), "--trials", "6"))
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "trials · " in line]
    assert lines and lines[-1].split(": ")[-1].startswith("6/6 (")
