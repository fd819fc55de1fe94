"""scaled: a stride loop over the first elements of W-element packs (a hand-vectorised loop), read as the stride
loop over packs it is.

    for (T i = START * W; i < BOUND; i += STEP * W) {       for (T p = START; p < (BOUND + W - 1) / W; p += STEP) {
      BODY                                            →       const T i = p * W;
    }                                                         BODY
                                                            }

where (START, STEP) is a block- or grid-stride pair and W is known at compile time (a literal, a template parameter,
a constexpr local, sizeof). The indices `i` visited, and their order per thread, are the original's: `p * W < BOUND`
exactly when `p < ceil(BOUND / W)`.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource
from cutune.template.recipes.items_per_thread import _bare as bare
from cutune.template.variants.canonical.guard import compile_time
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.loops import (
    counting_loop,
    indented,
    index_form,
    line_indent,
    local_values,
    stride_axes,
    written_names,
)

NAME = "scaled_loops"
PREFIX = "cutune_pack_"
_SHAPE = re.compile(r"\bfor\s*\([^;]*;[^;]*;[^;)]*\+=[^;)]*\*")  # a product in the step (the start's may be a local's)


def scaled_to_packs(model: SourceModel, kernel: str) -> SourceModel | str | None:
    """The model with `kernel`'s stride loops over pack starts written over packs; why not; None when it has none."""
    if not _SHAPE.search(kernel_body(model, kernel)):
        return None
    src = KernelSource(model, model.kernel(kernel))
    locals_ = local_values(src)
    edits = EditList(src.data)
    reasons: list[str] = []
    done: list[tuple[int, int]] = []
    for loop in src.in_body("for_statement"):
        if any(a <= loop.start_byte < b for a, b in done):
            continue
        found = _scaled(src, loop, locals_)
        if found is None:
            continue
        var, vtype, start, step, width, bound = found
        body = loop.child_by_field_name("body")
        assert body is not None
        if var in written_names(src, body):
            reasons.append(f"the loop at line {src.line(loop)} changes its index {var} inside the body")
            continue
        if re.search(rf"\b{re.escape(var)}\b", bound):
            reasons.append(f"the loop at line {src.line(loop)} has a bound that reads {var}")
            continue
        pack = f"{PREFIX}{var}"
        inner = src.text(body)[1:-1].rstrip().strip("\n") if body.type == "compound_statement" else src.text(body)
        margin = line_indent(src.data, body.named_children[0].start_byte) if body.named_children else ""
        inner = "\n".join(ln[len(margin) :] if ln.startswith(margin) else ln for ln in inner.split("\n"))
        packs = f"(({bound}) + ({width}) - 1) / ({width})"
        text = "\n".join(
            [
                f"for ({vtype} {pack} = {start}; {pack} < {packs}; {pack} += {step}) {{",
                f"  const {vtype} {var} = {pack} * ({width});",
                indented(inner.strip("\n"), "  "),
                "}",
            ]
        )
        edits.replace(loop.start_byte, loop.end_byte, indented(text, line_indent(src.data, loop.start_byte)).lstrip())
        done.append((loop.start_byte, loop.end_byte))
    if edits.edits:
        return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)
    return "; ".join(reasons) if reasons else None


def _scaled(src: KernelSource, loop: Node, locals_: dict[str, str]) -> tuple[str, str, str, str, str, str] | None:
    """(index, its type, START, STEP, W, BOUND) of `for (T i = START * W; i < BOUND; i += STEP * W)`, else None."""
    found = counting_loop(src, loop)
    if found is None:
        return None
    start_factors = _factors(src, _declared(src, bare(src, found.start), locals_))
    step_factors = _factors(src, bare(src, found.step))
    for width in start_factors:
        if not compile_time(src, width) or width not in step_factors:
            continue
        start = " * ".join(f for f in start_factors if f != width) or "1"
        rest = list(step_factors)
        rest.remove(width)
        step = " * ".join(rest) or "1"

        def form(text: str) -> str:
            return index_form(re.sub(r"[A-Za-z_]\w*", lambda m: locals_.get(m.group(0), m.group(0)), text))

        if stride_axes(form(start), form(step)) is not None:
            return found.index, found.index_type or "int", start, step, width, src.text(found.bound)
    return None


def _declared(src: KernelSource, node: Node, locals_: dict[str, str]) -> Node:
    """A local's value where `node` names one declared once and never written (`thread_offset = tid * W`), so its
    factors are read; else `node`."""
    if node.type != "identifier" or src.text(node) not in locals_:
        return node
    for d in src.in_body("init_declarator"):
        name, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
        if name is not None and value is not None and src.text(name) == src.text(node) and d.end_byte < node.start_byte:
            return bare(src, value)
    return node


def _factors(src: KernelSource, node: Node) -> list[str]:
    """The texts of the factors of a product (the node itself when it is none), parentheses and casts removed."""
    node = bare(src, node)
    if node.type == "binary_expression" and src.field(node, "operator") == "*":
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is not None and right is not None:
            return _factors(src, left) + _factors(src, right)
    return [src.text(node)]
