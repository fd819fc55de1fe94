"""offset_loops: a block-stride loop over a range of absolute indices (a group, a segment, a row found by its start),
written as a loop over the range's own elements, so the row and loop transforms read it:

    const int start = base + threadIdx.x;            for (int j = threadIdx.x; j < (long long)(end) - (long long)(base);
    for (int j = start; j < end; j += blockDim.x)  →      j += blockDim.x)
      y[j] = f(x[j], g[j - base]);                     y[(int)(base) + j] = f(x[(int)(base) + j], g[j]);

The thread with index `threadIdx.x` meets the same elements in the same order: element `base + threadIdx.x + k *
blockDim.x` of each array, while it lies below `end` (the bound is taken in 64 bits, so an empty range stays empty
whatever the types of `end` and `base`), and `j - base`, the element's place in the range, is the new index itself.
Only where that is certain: the index is an integer, `base` reads no thread index, neither `base`, `end` nor the
index changes inside the loop, and nothing takes the index's address; refused with the reason where the loop has the
shape but one of these does not hold. A read of the index as anything but a whole subscript or `j - base` (an index
kept in a local, `int col = j - base;` spelled otherwise, a call's argument) is the original's value written out,
`((T)(base) + j)`.
An unsigned index (FasterTransformer's `uint i = start`) is taken too. The two loops part only where the original's
index would pass its type's largest value inside the loop (a range ending within blockDim.x of 2^32 elements, for a
32-bit one): there the original's index wraps to the array's first elements and the loop runs over them again,
which no caller means; a signed index's overflow is undefined already.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.loops import (
    SIGNED_WIDTH,
    UNSIGNED_WIDTH,
    counting_loop,
    index_form,
    local_values,
    squeezed,
    whole_subscript,
    written_names,
)

NAME = "offset_loops"
_THREAD = "threadIdx.x"


def offset_to_row(model: SourceModel, kernel: str) -> SourceModel | str | None:
    """The model with `kernel`'s loops over an offset range written over the range's elements; why not; None when
    it has none."""
    body = kernel_body(model, kernel)
    if "for" not in body or _THREAD not in body:
        return None
    src = KernelSource(model, model.kernel(kernel))
    locals_ = local_values(src)
    written = written_names(src, src.body)
    edits = EditList(src.data)
    found = False
    for loop in src.in_body("for_statement"):
        shape = _offset_loop(src, loop, locals_, written)
        if isinstance(shape, str):
            return f"the loop at line {src.line(loop)} {shape}"
        if shape is None:
            continue
        value, bound, uses, relative, base, var_type = shape
        cast = f"({var_type})({base})"
        edits.replace(value.start_byte, value.end_byte, _THREAD)
        edits.replace(bound.start_byte, bound.end_byte, f"(long long)({src.text(bound)}) - (long long)({base})")
        for index in uses:  # a whole subscript as `a[base + j]`, any other read as the value in parentheses
            text = f"{cast} + {src.text(index)}"
            edits.replace(index.start_byte, index.end_byte, text if whole_subscript(index) else f"({text})")
        for difference in relative:  # `j - base` is the range's own index
            var = src.field(difference, "left")
            edits.replace(
                difference.start_byte, difference.end_byte, var if whole_subscript(difference) else f"({var})"
            )
        found = True
    if not found:
        return None
    return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)


def _offset_loop(
    src: KernelSource, loop: Node, locals_: dict[str, str], written: set[str]
) -> tuple[Node, Node, list[Node], list[Node], str, str] | str | None:
    """For `for (T j = base + threadIdx.x; j < end; j += blockDim.x)`: its start's and bound's nodes, the index's
    other reads, its uses as `j - base`, base's text and T; a reason when it has the shape but cannot be rewritten;
    else None."""
    found = counting_loop(src, loop)
    if found is None:
        return None
    var, value, bound, step, body, var_type = (
        found.index, found.start, found.bound, found.step, found.body, found.index_type
    )  # fmt: skip
    terms = _terms(index_form(locals_.get(squeezed(src.text(value)), squeezed(src.text(value)))))
    if terms is None or terms.count(_THREAD) != 1 or len(terms) < 2:
        return None
    if index_form(locals_.get(squeezed(src.text(step)), src.text(step))) != "blockDim.x":
        return None
    base = "+".join(t for t in terms if t != _THREAD)
    if "threadIdx" in base:
        return None
    if var_type not in SIGNED_WIDTH and var_type not in UNSIGNED_WIDTH:
        return f"runs an index of type `{var_type}` over an offset range: not an integer type this step reads"
    changed = written_names(src, body)
    names = set(re.findall(r"[A-Za-z_]\w*", base + " " + src.text(bound)))
    if var in changed or names & changed or (names - {var}) & written:
        return "changes its index, its start or its bound while it runs"
    uses, relative = [], []
    for ident in descendants(body, "identifier"):
        if src.text(ident) != var:
            continue
        difference = _less_base(src, ident, base, locals_)
        if difference is not None:
            relative.append(difference)
        elif _addressed(src, ident):
            return f"takes the address of its index {var} (line {src.line(ident)})"
        else:
            uses.append(ident)
    return value, bound, uses, relative, base, var_type


def _addressed(src: KernelSource, ident: Node) -> bool:
    """Whether `ident` is the operand of `&` or bound to a reference: the rewritten index is a value, not the index."""
    parent = ident.parent
    if parent is not None and parent.type == "pointer_expression" and src.field(parent, "operator") == "&":
        return True
    if parent is not None and parent.type == "init_declarator" and parent.child_by_field_name("value") == ident:
        target = parent.child_by_field_name("declarator")
        return target is not None and target.type == "reference_declarator"
    return False


def _less_base(src: KernelSource, ident: Node, base: str, locals_: dict[str, str]) -> Node | None:
    """The expression `ident - base` that `ident` is the left side of (base as written, or a local holding it);
    None where it is not one."""
    parent = ident.parent
    if parent is None or parent.type != "binary_expression" or src.field(parent, "operator") != "-":
        return None
    left, right = parent.child_by_field_name("left"), parent.child_by_field_name("right")
    if left is None or right is None or left.start_byte != ident.start_byte:
        return None
    text = squeezed(src.text(right))
    same = {index_form(text), index_form(locals_.get(text, text))} & {
        index_form(base),
        index_form(locals_.get(base, base)),
    }
    return parent if same else None


def _terms(text: str) -> list[str] | None:
    """The top-level terms of a sum (squeezed text); None when it subtracts at the top level."""
    terms, depth, current = [], 0, ""
    for ch in text:
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        if depth == 0 and ch == "-" and current and current[-1] not in "*/(":
            return None
        if depth == 0 and ch == "+":
            terms.append(current)
            current = ""
        else:
            current += ch
    terms.append(current)
    return terms
