"""Without a GPU, the agent's compile-only run proposes the built-in transforms' variants too."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cutune.cli import app
from cutune.gpu.device import gpu_available

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


@pytest.mark.nvcc
@pytest.mark.skipif(gpu_available(), reason="with a GPU the agent measures instead")
def test_the_compile_only_agent_proposes_structural_variants(tmp_path: Path) -> None:
    for name in ("silu_and_mul.cu", "silu_and_mul.tune.toml"):
        shutil.copy(ROOT / "samples" / name, tmp_path / name)
    (tmp_path / "pyproject.toml").write_text("")
    source = tmp_path / "silu_and_mul.cu"
    res = runner.invoke(app, ["agent", str(source), "-k", "silu_and_mul_kernel", "--iterations", "1"])
    assert res.exit_code == 0, res.output
    # as templatize: its tail loop reads as a block-stride loop (offset_loops), so the loop transforms chain onto
    # split_items, and the tokens pack into blocks (block_items)
    assert "variant 2 split_packs_per_thread (built-in transform): compiles" in res.output, res.output
    assert "variant 4 block_items (built-in transform): compiles" in res.output, res.output
