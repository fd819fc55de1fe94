"""row_count: rows numbered by a compile-time count of rows per block (`row = blockIdx.x * kRows + threadIdx.y`, or
a warp per row, `blockIdx.x * kWarps + threadIdx.x / 32`) read as numbered by the block's own shape (`blockDim.y`,
`blockDim.x / 32`), where every launch of the kernel in the file runs blocks of exactly that shape.

The count is a template parameter (its value the launch's template argument) or a `constexpr` local with a literal
value, as thread_count reads them. A launch's block matches where its y size is the count's text (`dim3(32, kRows)`
with `kRows` the argument), or, for warps, its x size is the count times the warp size (`4 * WARP_SIZE` for 4, or
128). Then the count and the block's shape are equal wherever the kernel runs, and rows_on_y reads the rows as rows
of a block. Refused, with the reason, where a launch's block cannot be matched to the count.
"""

from __future__ import annotations

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource
from cutune.template.recipes.host import HostResolver, launch_config
from cutune.template.variants.canonical.thread_count import compile_time_counts
from cutune.template.variants.loops import index_form, local_values
from cutune.template.variants.rows_on_y import warp_form

NAME = "row_count"

# the warp of a thread
_WARP_INDEX = {"threadIdx.x/32", "threadIdx.x>>5"}
# the block's shape the count stands for, by the axis the row's threads are numbered on
_SHAPE = {"y": "blockDim.y", "warp": "(blockDim.x / 32)"}


def block_shape_rows(model: SourceModel, kernel: str) -> SourceModel | str | None:
    """The model with `kernel`'s count of rows per block written as the block's shape; why not; None when its rows
    are not numbered by such a count."""
    src = KernelSource(model, model.kernel(kernel))
    counts = compile_time_counts(src)
    if not counts:
        return None
    found = _counted_rows(src, set(counts))
    if not found:
        return None
    name = src.text(found[0][0]).strip()
    launches = src.launches()
    if not launches:
        return (
            f"numbers its rows by {name} per block, and no launch of {kernel} in this file says how many a block holds"
        )
    for site, call in launches:
        config = launch_config(call)
        if len(config) < 2:
            return f"the launch at line {src.line(call)} has no block to compare with {name}"
        dims = HostResolver(src, call).dims_of(config[1])
        shape = [warp_form(src.text(d)) for d in dims[1]] if dims is not None and dims[1] else [src.text(config[1])]
        shape = [warp_form(s) for s in shape]
        for count, axis in found:
            value = counts[src.text(count).strip()](site.template_args)
            if value is None or not _matches(shape, warp_form(value), axis):
                return (
                    f"numbers its rows by {src.text(count).strip()} per block, but the launch at line {src.line(call)} "
                    f"runs a block of ({', '.join(shape)}) where {src.text(count).strip()} is `{value}`"
                )
    edits = EditList(src.data)
    for count, axis in found:
        edits.replace(count.start_byte, count.end_byte, _SHAPE[axis])
    return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)


def _counted_rows(src: KernelSource, counts: set[str]) -> list[tuple[Node, str]]:
    """Each `blockIdx.x * COUNT + ROW` of the kernel (either order of terms and factors): COUNT's node and the axis
    ROW numbers the block's rows on ("y": threadIdx.y; "warp": the thread's warp, or a local holding either)."""
    values = {k: warp_form(v) for k, v in local_values(src).items()}
    found: list[tuple[Node, str]] = []
    for node in src.in_body("binary_expression"):
        if src.field(node, "operator") != "+":
            continue
        terms = [node.child_by_field_name("left"), node.child_by_field_name("right")]
        for product, row in (terms, terms[::-1]):
            if product is None or row is None or product.type != "binary_expression":
                continue
            if src.field(product, "operator") != "*":
                continue
            factors = [product.child_by_field_name("left"), product.child_by_field_name("right")]
            for block, count in (factors, factors[::-1]):
                if block is None or count is None or index_form(src.text(block)) != "blockIdx.x":
                    continue
                if src.text(count).strip() not in counts:
                    continue
                form = warp_form(src.text(row))
                form = values.get(form, form)
                if form == "threadIdx.y":
                    found.append((count, "y"))
                elif form in _WARP_INDEX:
                    found.append((count, "warp"))
    return found


def _matches(shape: list[str], value: str, axis: str) -> bool:
    """Whether a launch's block (its sizes, squeezed) holds `value` rows on `axis`."""
    if axis == "y":
        return len(shape) >= 2 and shape[1] == value and all(s == "1" for s in shape[2:])
    if any(s != "1" for s in shape[1:]):
        return False
    x = shape[0]
    if x in (f"{value}*32", f"32*{value}", f"({value})*32", f"32*({value})"):
        return True
    return x.isdigit() and value.isdigit() and int(x) == 32 * int(value)
