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


def test_templatize_lists_each_variant_with_the_value_the_search_tries_first(tmp_path: Path) -> None:
    for name in ("online_softmax.cu", "online_softmax.tune.toml"):
        shutil.copy(ROOT / "samples" / name, tmp_path / name)
    res = runner.invoke(app, ["templatize", str(tmp_path / "online_softmax.cu"), "-k", "online_softmax_kernel"])
    assert res.exit_code == 0, res.output
    listed = " ".join(res.output.split())  # rich wraps long lines
    assert "variant 3 row_cache (row_cache:" in listed
    assert "ROW_CACHE_ROUNDS ∈ {0, 1, 2, 4, 8, 16, 32}, tried first at 4" in listed
    assert (
        "variant 2 online_merge (online_merge:" in listed
        and "tried first" not in listed.split("variant 2")[1].split("variant 3")[0]
    )
