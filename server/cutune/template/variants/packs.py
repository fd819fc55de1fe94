"""packs_per_thread: each thread takes ITEMS consecutive strides of a stride loop per iteration, unrolled,
so the loads of several of its elements (or packs) are in flight together.

Each thread still visits exactly its own indices, in the same order: index `i0 + u·STEP` for u < ITEMS,
where the loop steps `i0` by STEP·ITEMS. When no thread index or block size is read outside the loops,
the variant may also launch fewer threads per block (ITEMS_BLOCK_DIV), each doing more of the work; when the
loops are grid-stride and the grid means nothing else, fewer blocks (ITEMS_GRID_DIV).
"""

from __future__ import annotations

from cutune.cuda.model import SourceModel
from cutune.errors import TransformRefused
from cutune.spec import KernelSpec
from cutune.template.edits import EditList
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import KernelSource
from cutune.template.variants.loops import (
    StrideLoop,
    divided_launch,
    edited_body,
    indented,
    kernel_source,
    line_indent,
    loop_blockers,
    required_stride_loops,
)
from cutune.template.variants.model import Provenance, Transform, Variant

NAME = "packs_per_thread"


class PacksPerThread(Transform):
    name = "packs_per_thread"

    def apply(self, model: SourceModel, kernel: str, spec: KernelSpec | None) -> Variant:
        src = kernel_source(self.name, model, kernel)
        loops = required_stride_loops(self.name, src)
        edits = EditList(src.data)
        done: list[StrideLoop] = []
        refusals: list[str] = []
        for index, loop in enumerate(loops):
            # each thread keeps its own indices in their order; fewer threads (BLOCK_DIV) only where block_free
            # finds no thread index read outside the loop headers, so nothing thread-dependent is read then either
            blocker = loop_blockers(src, loop, regrouped=False)
            if blocker is not None:
                refusals.append(f"the loop at line {src.line(loop.node)} {blocker}")
                continue
            new = indented(_unrolled(src, loop, index), line_indent(src.data, loop.node.start_byte))
            edits.replace(loop.node.start_byte, loop.node.end_byte, new.lstrip())
            done.append(loop)
        if not done:
            raise TransformRefused(self.name, "; ".join(refusals))
        inner = edited_body(src, edits)
        params = [TunableParam("ITEMS", (2, 4, 8), 2, Binding.TEMPLATE, description="strides per thread per iteration")]
        divided, launch = divided_launch(src, done, "ITEMS_", "")
        params += divided
        lines = ", ".join(str(src.line(lp.node)) for lp in done)
        return Variant(
            name=NAME,
            body=inner,
            params=tuple(params),
            launch=launch,
            provenance=Provenance(self.name, note=f"ITEMS strides per thread in the loop(s) at line {lines}"),
        )


def _unrolled(src: KernelSource, loop: StrideLoop, index: int) -> str:
    var, vt = loop.var, loop.var_type or "long long"
    outer, item = f"cutune_i{index}", f"cutune_item{index}"
    body = src.text(loop.body)
    return "\n".join(
        [
            f"for ({vt} {outer} = {loop.start}; {outer} < {loop.bound}; {outer} += ({loop.step}) * ITEMS) {{",
            "#pragma unroll",
            f"  for (int {item} = 0; {item} < ITEMS; ++{item}) {{",
            f"    const {vt} {var} = {outer} + {item} * ({loop.step});",
            f"    if ({var} < {loop.bound}) " + indented(body, "    ").lstrip(),
            "  }",
            "}",
        ]
    )
