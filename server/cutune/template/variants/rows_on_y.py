"""Rows on the block's y axis (`row = blockIdx.x * blockDim.y + threadIdx.y`: a warp or a few per row, several rows
per block) read as one row per block, so row_reduce rewrites them like any one-block-per-row kernel.

Row `blockIdx.x * blockDim.y + threadIdx.y` of the original launch becomes block `blockIdx.x` of a launch with
`grid.x * block.y` blocks of one row of threads: every row is computed by the same x threads as before, only in
a block of its own. That holds only where the y axis does nothing else: every `threadIdx.y` and `blockDim.y` of the
kernel lies in that row index, and the kernel never reads `gridDim.x` (the new grid has more blocks along x).
"""

from __future__ import annotations

import re

from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource
from cutune.template.variants.loops import index_form

# the row index in index form, every order of its terms and factors
_ROW = {
    f"{a}+threadIdx.y" if first else f"threadIdx.y+{a}"
    for a in ("blockIdx.x*blockDim.y", "blockDim.y*blockIdx.x")
    for first in (True, False)
}
_Y = re.compile(r"(threadIdx|blockDim)\.y")
# the launch of the rewritten kernel: one block per row of the original's blocks
GRID_X = "({grid.x}) * ({block.y})"


def rows_on_y(src: KernelSource) -> str | None:
    """The file's text with the kernel's y-axis row index written `blockIdx.x`; None when the kernel has none, or
    its y axis (or the grid's size along x) means something else too."""
    rows = [n for n in src.in_body("binary_expression") if index_form(src.text(n)) in _ROW]
    if not rows:
        return None
    for node in src.in_body("field_expression"):
        text = index_form(src.text(node))
        if text == "gridDim.x":
            return None
        if _Y.fullmatch(text) and not any(r.start_byte <= node.start_byte < r.end_byte for r in rows):
            return None
    edits = EditList(src.data)
    for node in rows:
        edits.replace(node.start_byte, node.end_byte, "blockIdx.x")
    return apply_edits(src.model.text, edits.edits)
