"""Rows on the block's y axis (`row = blockIdx.x * blockDim.y + threadIdx.y`: a warp or a few per row, several rows
per block) read as one row per block, so row_reduce rewrites them like any one-block-per-row kernel.

Row `blockIdx.x * blockDim.y + threadIdx.y` of the original launch becomes block `blockIdx.x` of a launch with
`grid.x * block.y` blocks of one row of threads: every row is computed by the same x threads as before, only in
a block of its own. That holds only where the y axis does nothing else: every `threadIdx.y` and `blockDim.y` of the
kernel lies in that row index, and the kernel reads `gridDim.x` only in `gridDim.x * blockDim.y`, the rows the grid
holds at once (the new grid has that many blocks along x).
"""

from __future__ import annotations

import re

from tree_sitter import Node

from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource
from cutune.template.variants.loops import index_form, local_values

# the row index in index form, every order of its terms and factors
_ROW = {
    f"{a}+threadIdx.y" if first else f"threadIdx.y+{a}"
    for a in ("blockIdx.x*blockDim.y", "blockDim.y*blockIdx.x")
    for first in (True, False)
}
# the number of rows the grid holds at once, for a persistent loop over rows (`row += gridDim.x * blockDim.y`)
_WORKERS = {"gridDim.x*blockDim.y", "blockDim.y*gridDim.x"}
_AXES = re.compile(r"(threadIdx|blockDim)\.y|gridDim\.x")
_BUILTIN = re.compile(r"(threadIdx|blockDim|blockIdx|gridDim)\.[xyz]")
# the launch of the rewritten kernel: one block per row of the original's blocks
GRID_X = "({grid.x}) * ({block.y})"


def rows_on_y(src: KernelSource) -> str | None:
    """The file's text with the kernel's y-axis row index written `blockIdx.x` (and the rows the grid holds at once,
    `gridDim.x * blockDim.y`, written `gridDim.x`); None when the kernel has none, or its y axis (or the grid's size
    along x) means something else too. The builtins may be spelled through locals (`bx * warps + ty`): a local
    read only inside those expressions is set to 0 instead, the row's reading never using it."""
    values = {k: index_form(v) for k, v in local_values(src).items() if _BUILTIN.fullmatch(index_form(v))}

    def form(node: Node) -> str:
        return index_form(
            re.sub(r"[A-Za-z_]\w*(?:\.[xyz])?", lambda m: values.get(m.group(0), m.group(0)), src.text(node))
        )

    rows = [n for n in src.in_body("binary_expression") if form(n) in _ROW]
    if not rows:
        return None
    rows += [n for n in src.in_body("binary_expression") if form(n) in _WORKERS]
    inside = [(r.start_byte, r.end_byte) for r in rows]
    held = {k for k, v in values.items() if _AXES.fullmatch(v)}  # locals holding the y axis or the grid's x size
    edits = EditList(src.data)
    for node in src.in_body("field_expression", "identifier"):
        text = index_form(src.text(node))
        parent = node.parent
        declares = (
            parent is not None and parent.type == "init_declarator" and parent.child_by_field_name("declarator") == node
        )
        if node.type == "identifier" and (text not in held or declares):
            continue
        if node.type == "field_expression" and not _AXES.fullmatch(text):
            continue
        if any(a <= node.start_byte < b for a, b in inside):
            continue
        declarator = node.parent
        if (
            node.type == "field_expression"
            and declarator is not None
            and declarator.type == "init_declarator"
            and src.field(declarator, "declarator").strip() in held
        ):
            edits.replace(node.start_byte, node.end_byte, "0")  # the local's value, read only where rewritten
            continue
        return None
    for node in rows:
        edits.replace(node.start_byte, node.end_byte, "blockIdx.x" if form(node) in _ROW else "gridDim.x")
    return apply_edits(src.model.text, edits.edits)
