"""`templatize` without `--write` shows what tune will use: the existing spec and the space it searches."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from cutune.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_templatize_shows_the_existing_spec_and_the_space_tune_searches(tmp_path: Path) -> None:
    for name in ("rms_norm.cu", "rms_norm.tune.toml"):
        shutil.copy(ROOT / "samples" / name, tmp_path / name)
    res = runner.invoke(app, ["templatize", str(tmp_path / "rms_norm.cu"), "-k", "rms_norm_kernel"])
    assert res.exit_code == 0, res.output
    assert "drafted spec" not in res.output and "TODO" not in res.output
    assert "the kernel's spec (rms_norm.tune.toml, used by check and tune)" in res.output
    assert "parameters of rms_norm_kernel (as the spec narrows them)" in res.output
    table = res.output.split("(as the spec narrows them)", 1)[1].split("applied:", 1)[0]
    assert "BLOCK_THREADS" not in table  # the spec searches specialisation and fast math only
