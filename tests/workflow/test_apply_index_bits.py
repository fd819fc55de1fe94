"""Applying a result whose winner computes indices in 32 bits: even where it wins at every size it is launched under
the host's guard on the spec's index extents, never written as the kernel's default."""

from __future__ import annotations

import re
from pathlib import Path

from cutune.project import open_kernel
from cutune.template.recipes.index_bits import narrowed
from cutune.tune.result import TuneResult
from cutune.workflow import apply_result
from tests.agent.builders import dispatch_result
from tests.template.kernels import nvcc
from tests.template.recipes.test_index_bits import KERNEL, SCATTER

SPEC = """\
[kernel.scatter_rows_kernel]
template_args = { T = "float" }
grid = "(n_rows * cols + 255) / 256"
block = "256"
sizes = [{ n_rows = 16, cols = 4096 }, { n_rows = 8192, cols = 4096 }]
args = [
  { name = "src", dtype = "float32", shape = ["n_rows", "cols"] },
  { name = "rows", dtype = "int64", shape = ["n_rows"], init = "permutation" },
  { name = "dst", dtype = "float32", role = "out", shape = ["n_rows", "cols"] },
  { name = "cols", dtype = "int64", value = "cols" },
  { name = "n_rows", dtype = "int64", value = "n_rows" },
  { name = "dst_stride", dtype = "int64", value = "cols" },
]
"""


def test_32_bits_winning_everywhere_is_launched_under_the_guard(tmp_path: Path) -> None:
    (tmp_path / "scatter.cu").write_text(SCATTER)
    (tmp_path / "scatter.tune.toml").write_text(SPEC)
    ctx = open_kernel(tmp_path / "scatter.cu", KERNEL)
    assert ctx.spec is not None, ctx.spec_error
    narrow = narrowed(ctx.space.default())
    result = dispatch_result(ctx, [narrow, narrow])  # 32 bits win at both sizes
    applied = apply_result(ctx, result)
    host = applied.text[applied.text.index("void scatter_rows(") :]
    assert "<= 1073741824) {  // every index fits in 32 bits" in host
    assert re.search(r"scatter_rows_kernel<float, [^<>]*\b32><<<", host)
    assert "static constexpr int INDEX_BITS = 64;" in applied.text  # the default stays the original's
    nvcc(applied.text)
    # without a dispatch to guard it, the winner is written with 64-bit indices, and the report says so
    alone = apply_result(ctx, TuneResult(**{**result.__dict__, "dispatch": None}))
    assert not re.search(r"\b32><<<", alone.text) and any("keeps 64-bit indices" in n for n in alone.notes)
