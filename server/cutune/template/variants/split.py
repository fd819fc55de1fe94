"""split_items: a one-block-per-item kernel (the block index is the work item; block-stride loops go over the
item's elements) runs each item on SPLIT blocks, so a few items (decode: 1–16 tokens) still fill the GPU.

The grid gains a y axis of SPLIT blocks: item `blockIdx.x` stays where it was, and each block-stride loop
`for (i = threadIdx.x; i < n; i += blockDim.x)` becomes `for (i = blockIdx.y * blockDim.x + threadIdx.x;
i < n; i += blockDim.x * gridDim.y)`. Element `i` is still handled by the thread with
`threadIdx.x == i % blockDim.x`, so what a thread computes per element is unchanged; what changes is
which block holds it, and that is safe only when blocks never need each other: no barrier, shared memory
or warp collective, no state carried from one iteration to the next, and nothing written to memory
outside the loops (every split block runs that code again). At SPLIT = 1 the variant is the original, so
the loop transforms chain onto it (vectorize, packs per thread).
"""

from __future__ import annotations

import re

from cutune.cuda.model import SourceModel
from cutune.errors import TransformRefused
from cutune.spec import KernelSpec
from cutune.template.edits import EditList
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.loops import (
    COOPERATION,
    StrideLoop,
    declared_names,
    edited_body,
    kernel_source,
    loop_blockers,
    squeezed,
    stride_loops,
    written_names,
)
from cutune.template.variants.model import Launch, Provenance, Transform, Variant

NAME = "split"
TRANSFORM = "split_items"
START = "blockIdx.y * blockDim.x + threadIdx.x"
STEP = "blockDim.x * gridDim.y"
# calls that only read (intrinsics, casts, math): they may run outside the loops in every split block
_PURE_CALL = re.compile(r"__\w+|\w+_cast(<.*>)?|min|max|f?abs\w*|\w+f|sqrt|rsqrt|exp|log|pow|sin|cos|tanh")


class SplitItems(Transform):
    name = TRANSFORM
    chainable = True

    def apply(self, model: SourceModel, kernel: str, spec: KernelSpec | None) -> Variant:
        src = kernel_source(self.name, model, kernel)
        if spec is not None and any(squeezed(g) != "1" for g in spec.grid[1:]):
            raise TransformRefused(self.name, "the launch grid has more than one dimension already")
        loops, reasons = stride_loops(src)
        if not loops:
            why = "; ".join(reasons) if reasons else "the kernel has no for loop"
            raise TransformRefused(self.name, f"no block-stride loop over an item's elements ({why})")
        _check_blocks_independent(src, loops)
        edits = EditList(src.data)
        for loop in loops:
            init = loop.node.child_by_field_name("initializer")
            update = loop.node.child_by_field_name("update")
            assert init is not None and update is not None  # a stride loop has both
            value = init.children_by_field_name("declarator")[0].child_by_field_name("value")
            step = update.child_by_field_name("right")
            assert value is not None and step is not None
            edits.replace(value.start_byte, value.end_byte, START)
            edits.replace(step.start_byte, step.end_byte, STEP)
        inner = edited_body(src, edits)
        lines = ", ".join(str(src.line(lp.node)) for lp in loops)
        return Variant(
            name=NAME,
            body=inner,
            params=(
                TunableParam(
                    "SPLIT",
                    (1, 2, 4, 8, 16),
                    1,
                    Binding.LAUNCH,
                    description="blocks per work item (split)",
                    try_first=4,  # a middle value: the corpus searches (runs 32-96) kept 2, 4 and 16 once each
                ),
            ),
            launch=Launch(grid=("{grid}", "SPLIT"), block=("{block}",)),
            provenance=Provenance(self.name, note=f"each item on SPLIT blocks (grid y) in the loop(s) at line {lines}"),
        )


def _check_blocks_independent(src: KernelSource, loops: list[StrideLoop]) -> None:
    """TransformRefused unless the kernel is one block per item whose blocks could share an item safely."""

    def refuse(reason: str) -> None:
        raise TransformRefused(TRANSFORM, reason)

    grid = [lp for lp in loops if lp.grid_stride]
    if grid:
        refuse(f"the loop at line {src.line(grid[0].node)} is grid-stride already: blocks share the work")
    for node in src.in_body("identifier", "namespace_identifier", "type_qualifier"):
        text = src.text(node)
        if COOPERATION.fullmatch(text) or text == "cub":
            refuse(f"threads of a block cooperate through {text} (line {src.line(node)})")
    fields = [src.text(n) for n in src.in_body("field_expression")]
    if not any(f == "blockIdx.x" for f in fields):
        refuse("the kernel does not read blockIdx.x: it is not one block per work item")
    if any(re.fullmatch(r"(blockIdx|gridDim)\.[yz]", f) for f in fields):
        refuse("the kernel reads the grid's y or z axis already")
    for loop in loops:
        blocker = loop_blockers(src, loop)
        if blocker is not None:
            refuse(f"the loop at line {src.line(loop.node)} {blocker}")
        carried = sorted(written_names(src, loop.body) - declared_names(src, loop.body))
        if carried:
            refuse(
                f"the loop at line {src.line(loop.node)} carries {carried[0]} from one iteration to the next: "
                "a thread's iterations would change"
            )
    spans = [(lp.node.start_byte, lp.node.end_byte) for lp in loops]

    def outside(node_start: int) -> bool:
        return not any(a <= node_start < b for a, b in spans)

    for node in src.in_body("field_expression"):
        if src.text(node).startswith("threadIdx") and outside(node.start_byte):
            refuse(f"{src.text(node)} is read outside the loops (line {src.line(node)}): work per thread")
    for node in descendants(src.body, "assignment_expression", "update_expression"):
        target = node.child_by_field_name("left" if node.type == "assignment_expression" else "argument")
        if target is not None and target.type != "identifier" and outside(node.start_byte):
            refuse(f"{src.text(target)} is written outside the loops (line {src.line(node)}): every split block would")
    for call in descendants(src.body, "call_expression"):
        function = src.field(call, "function")
        if outside(call.start_byte) and not _PURE_CALL.fullmatch(function):
            refuse(f"{function} is called outside the loops (line {src.line(call)}): it could write memory")
