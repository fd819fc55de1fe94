"""Rows on the block's y axis (`row = blockIdx.x * blockDim.y + threadIdx.y`: a warp or a few per row, several rows
per block) read as one row per block, so row_reduce rewrites them like any one-block-per-row kernel.

Row `blockIdx.x * blockDim.y + threadIdx.y` of the original launch becomes block `blockIdx.x` of a launch with
`grid.x * block.y` blocks of one row of threads: every row is computed by the same x threads as before, only in
a block of its own. That holds only where the y axis does nothing else: every `threadIdx.y` and `blockDim.y` of the
kernel lies in that row index, and the kernel reads `gridDim.x` only in `gridDim.x * blockDim.y`, the rows the grid
holds at once (the new grid has that many blocks along x). Besides, `threadIdx.y` may pick the row's own slice of a
`__shared__` array (`partial[threadIdx.y][warp]`): where every use of the array is such a slice, rows of a block
never meet through it, and a row alone in its block takes slice 0.

A warp per row in a 1-D block (`row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32`, the row walked from the
lane `threadIdx.x % 32` by steps of 32) is the same kernel on a (32, warps) block: thread x of the 1-D block is lane
x % 32 of warp x / 32 in either, where the kernel reads threadIdx.x and blockDim.x only as the warp, the lane and
the warps per block, and the block is whole warps (the spec's, or else the full-mask shuffles of the kernel assume
it). warps_on_y writes it so; rows_on_y then reads it as any rows on y.
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
# the same for a warp per row of a 1-D block: one block per warp of the original's blocks
WARP_GRID_X = "({grid.x}) * (({block.x}) / 32)"
_WARP = "32"
# a warp's index, its lane and the warps of a block, in index form with the warp size written 32
_ON_Y = {
    **dict.fromkeys(("threadIdx.x/32", "threadIdx.x>>5"), "threadIdx.y"),
    **dict.fromkeys(("threadIdx.x%32", "threadIdx.x&31", "threadIdx.x&(32-1)"), "threadIdx.x"),
    **dict.fromkeys(("blockDim.x/32", "blockDim.x>>5"), "blockDim.y"),
}
# the warp size by its usual names, namespace-qualified or not
_WARP_SIZE = re.compile(r"\b(?:\w+::)*(WARP_SIZE|warpSize|WARPSIZE|kWarpSize|kWarp)\b")
_FULL_MASK = re.compile(r"shfl\w*_sync\s*\(\s*0xffffffff", re.IGNORECASE)


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
    for index in _row_slices(src, {"threadIdx.y"} | {k for k, v in values.items() if v == "threadIdx.y"}):
        inside.append((index.start_byte, index.end_byte))
        if index.type == "field_expression":  # a local holding threadIdx.y is set to 0 where it is declared
            edits.replace(index.start_byte, index.end_byte, "0")
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


def _row_slices(src: KernelSource, ys: set[str]) -> list[Node]:
    """The indices `threadIdx.y` (or a local in `ys` holding it) of the static `__shared__` arrays of the kernel every
    use of which is the row's own slice (`S[threadIdx.y]...`, the y index first): arrays the block's rows never
    share."""
    slices: list[Node] = []
    for decl in src.in_body("declaration"):
        if not any(src.text(c) == "__shared__" for c in decl.children):
            continue
        for declarator in decl.children_by_field_name("declarator"):
            name = _array_name(declarator)
            if name is None:
                continue
            uses = [
                n
                for n in src.in_body("identifier")
                if src.text(n) == src.text(name) and not decl.start_byte <= n.start_byte < decl.end_byte
            ]
            found = [index for use in uses if (index := _slice_index(src, use, ys)) is not None]
            if uses and len(found) == len(uses):
                slices += found
    return slices


def _array_name(declarator: Node) -> Node | None:
    """The name of an array declarator (`S[8][4]`), None for any other declarator."""
    if declarator.type != "array_declarator":
        return None
    while declarator.type == "array_declarator":
        inner = declarator.child_by_field_name("declarator")
        if inner is None:
            return None
        declarator = inner
    return declarator if declarator.type == "identifier" else None


def _slice_index(src: KernelSource, use: Node, ys: set[str]) -> Node | None:
    """The index of `S[y]` where `use` is the S of it and y one of `ys`; None for any other use of S."""
    parent = use.parent
    if parent is None or parent.type != "subscript_expression" or parent.child_by_field_name("argument") != use:
        return None
    indices = parent.child_by_field_name("indices")
    named = [c for c in indices.named_children if c.type != "comment"] if indices is not None else []
    if len(named) != 1 or index_form(src.text(named[0])) not in ys:
        return None
    return named[0]


def warps_on_y(src: KernelSource, block_x: list[int] | None) -> str | None:
    """The file's text with the kernel's warp per row of a 1-D block written as rows on y (the warp `threadIdx.y`,
    the lane `threadIdx.x`, the warps per block `blockDim.y`, a loop from the lane by the warp size then by
    `blockDim.x`); None when the kernel is not so, reads threadIdx.x or blockDim.x otherwise, or its block may hold
    part of a warp (`block_x`: the spec's block along x at each size; without it the kernel's full-mask shuffles
    must assume whole warps)."""
    if block_x is not None and any(x % 32 for x in block_x):
        return None
    if block_x is None and not _FULL_MASK.search(src.text(src.body)):
        return None
    fields = src.in_body("field_expression")
    if any(index_form(src.text(n)) in ("threadIdx.y", "blockDim.y", "threadIdx.z", "blockDim.z") for n in fields):
        return None

    def form(node: Node | None) -> str:
        return warp_form(src.text(node)) if node is not None else ""

    edits = EditList(src.data)
    spans: list[tuple[int, int]] = []
    lanes: set[str] = set()  # locals holding the lane
    for node in src.in_body("binary_expression"):
        new = _ON_Y.get(form(node))
        if new is None or any(a <= node.start_byte < b for a, b in spans):
            continue
        spans.append((node.start_byte, node.end_byte))
        edits.replace(node.start_byte, node.end_byte, new)
        parent = node.parent
        if new == "threadIdx.x" and parent is not None and parent.type == "init_declarator":
            lanes.add(src.field(parent, "declarator").strip())
    if "threadIdx.y" not in (_ON_Y[form(n)] for n in src.in_body("binary_expression") if form(n) in _ON_Y):
        return None  # no warp index: not a warp per row
    for node in fields:
        inside = any(a <= node.start_byte < b for a, b in spans)
        if index_form(src.text(node)) in ("threadIdx.x", "blockDim.x") and not inside:
            return None  # the thread's place in the block read otherwise than as its warp and lane
    for loop in src.in_body("for_statement"):
        init, update = loop.child_by_field_name("initializer"), loop.child_by_field_name("update")
        declarators = init.children_by_field_name("declarator") if init is not None else []
        value = declarators[0].child_by_field_name("value") if len(declarators) == 1 else None
        step = update.child_by_field_name("right") if update is not None else None
        lane = form(value) in lanes or _ON_Y.get(form(value)) == "threadIdx.x"
        if (
            lane
            and update is not None
            and step is not None
            and src.field(update, "operator") == "+="
            and form(step) == _WARP
        ):
            edits.replace(step.start_byte, step.end_byte, "blockDim.x")
    return apply_edits(src.model.text, edits.edits)


def warp_form(text: str) -> str:
    """`text` in index form with the warp size written 32."""
    return index_form(_WARP_SIZE.sub(_WARP, text))
