"""index_locals: a loop body's local that only names an element (`int64_t id = row * stride + i; ... a[id]`),
written out where it is used, so the transforms read each access as the element of the loop's index it is:

    for (int i = tid; i < n; i += blockDim.x) {           for (int i = tid; i < n; i += blockDim.x) {
      const int64_t id = blockIdx.x * stride + i;    →      y[blockIdx.x * stride + i] = f(x[blockIdx.x * stride + i]);
      y[id] = f(x[id]);                                   }
    }

Only where each access names the same element either way: the local is declared in the loop's body itself (not in a
nested block), alone in its declaration, with an integer type; it is never written and is read only in subscripts:
where it is a whole one (`a[id]`) it is written out, and the declaration stays only for the indices that compute
with it (`out[id * W + j]`, an element of the pack the local names); its value reads the loop's index and otherwise
only names that the body neither writes nor declares anywhere but once at its top before the local, through
arithmetic and casts alone (no other call, no memory read, no assignment, no conditional), and the index only
through sums, differences and products (a local dividing it, `row = i / d`, is a row of a flat index, which
flat_rows reads as a local once a row).
The value is written out as it is, its casts included; only its conversion to the local's type goes, which changes
nothing while the index arithmetic does not wrap in its own type: the premise under which the transforms read
`a[base + i]` already, and which the check of every variant against the original tests at each size.
"""

from __future__ import annotations

import re
from collections import Counter

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.loops import (
    SIGNED_WIDTH,
    declared_names,
    single_declaration,
    static_cast_call,
    whole_subscript,
    written_names,
)

NAME = "index_locals"
_INTEGER = re.compile(
    r"(?:unsigned\s+|signed\s+)?(?:long\s+long|long|int|short)(?:\s+int)?|u?int(?:8|16|32|64)_t|size_t"
)
_LINEAR = {"+", "-", "*"}  # what may be done to the loop's index: the element is an affine function of it
_OPERATORS = {"+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^"}


def substitute_index_locals(model: SourceModel, kernel: str) -> SourceModel | None:
    """The model with `kernel`'s element-naming loop locals written out at their uses; None when it has none."""
    body = kernel_body(model, kernel)
    if "for" not in body or "[" not in body:
        return None
    src = KernelSource(model, model.kernel(kernel))
    edits = EditList(src.data)
    found = False
    for loop in src.in_body("for_statement"):
        index = _loop_index(src, loop)
        loop_body = loop.child_by_field_name("body")
        if index is None or loop_body is None or loop_body.type != "compound_statement":
            continue
        changed = written_names(src, loop)  # the index too (its step); the body must not write it as well
        if index in written_names(src, loop_body):
            continue
        for statement in loop_body.named_children:
            shape = _index_local(src, statement, index, changed, _ambiguous(src, loop_body, statement))
            if shape is None:
                continue
            name, value = shape
            found_uses = _subscript_uses(src, loop_body, statement, name)
            if found_uses is None:
                continue
            uses, kept = found_uses
            if not uses:
                continue
            if not kept:  # read nowhere else: the declaration goes too
                edits.replace(*_whole_lines(src.data, statement), "")
            for use in uses:
                edits.replace(use.start_byte, use.end_byte, src.text(value))
            found = True
    if not found:
        return None
    return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)


def _whole_lines(data: bytes, node: Node) -> tuple[int, int]:
    """`node`'s bytes, widened to its whole lines where nothing else shares them (so no blank line is left)."""
    start = data.rfind(b"\n", 0, node.start_byte) + 1
    end = data.find(b"\n", node.end_byte)
    end = len(data) if end < 0 else end + 1
    if data[start : node.start_byte].strip() or data[node.end_byte : end].strip():
        return node.start_byte, node.end_byte
    return start, end


def _loop_index(src: KernelSource, loop: Node) -> str | None:
    """The name of the one variable a `for` loop's initializer declares, or None."""
    declared = single_declaration(loop.child_by_field_name("initializer"))
    return src.text(declared[0]) if declared is not None else None


def _nested_declared(src: KernelSource, body: Node) -> set[str]:
    """The names declared in blocks nested in `body` (where a name of a local's value could mean another thing)."""
    names: set[str] = set()
    for child in body.named_children:
        if child.type != "declaration":
            names |= declared_names(src, child)
    return names


def _ambiguous(src: KernelSource, body: Node, statement: Node) -> set[str]:
    """The names declared in `body` that a use after `statement` could read as another thing than `statement` does:
    all but those declared once, at the body's top, before it."""
    counts: Counter[str] = Counter()
    earlier: set[str] = set()
    for child in body.named_children:
        names = declared_names(src, child)
        counts.update(names)
        if child.type == "declaration" and child.end_byte <= statement.start_byte:
            earlier |= names
    return {name for name, count in counts.items() if count > 1 or name not in earlier}


def _index_local(
    src: KernelSource, statement: Node, index: str, changed: set[str], ambiguous: set[str]
) -> tuple[str, Node] | None:
    """For `T name = value;` with T an integer type and value arithmetic over `index` and names that stay what they
    are wherever the local is read: the name and the value's node; else None."""
    declared = single_declaration(statement)
    if declared is None:
        return None
    name, value = declared
    declared_type = src.text(statement)[: name.start_byte - statement.start_byte]
    type_text = " ".join(re.sub(r"\b(?:const|constexpr|__restrict__)\b", " ", declared_type).split())
    if not (type_text in SIGNED_WIDTH or _INTEGER.fullmatch(type_text)):
        return None
    names = _arithmetic_names(src, value, index)
    if names is None or index not in names or names & (changed - {index}) or names & ambiguous:
        return None
    return src.text(name), value


def _arithmetic_names(src: KernelSource, node: Node, index: str) -> set[str] | None:
    """The names an integer expression of names, members (`blockIdx.x`, `p.n`), literals, arithmetic operators and
    casts reads; None for anything else (another call, a memory read, an assignment, a conditional) and where
    `index` is taken other than by sums, differences and products."""
    if node.type == "identifier":
        return {src.text(node)}
    if node.type == "number_literal":
        return set()
    if node.type == "field_expression":
        argument = node.child_by_field_name("argument")
        if argument is None or argument.type != "identifier" or src.field(node, "operator") != ".":
            return None
        return {src.text(argument)}
    parts = [c for c in node.named_children if c.type != "comment"]
    if node.type == "parenthesized_expression" and len(parts) == 1:
        return _arithmetic_names(src, parts[0], index)
    if node.type == "cast_expression" and (value := node.child_by_field_name("value")) is not None:
        return _arithmetic_names(src, value, index)
    if node.type == "call_expression" and static_cast_call(src, node):
        arguments = node.child_by_field_name("arguments")
        inside = [c for c in arguments.named_children if c.type != "comment"] if arguments is not None else []
        return _arithmetic_names(src, inside[0], index) if len(inside) == 1 else None
    if node.type == "binary_expression" and src.field(node, "operator") in _OPERATORS:
        found: set[str] = set()
        for part in parts:
            names = _arithmetic_names(src, part, index)
            if names is None:
                return None
            found |= names
        if index in found and src.field(node, "operator") not in _LINEAR:
            return None  # `i / d`, `i % d`: a row and column of a flat index, what flat_rows reads as such
        return found
    return None


def _subscript_uses(src: KernelSource, body: Node, declaration: Node, name: str) -> tuple[list[Node], bool] | None:
    """The uses of `name` after its declaration in `body` that are whole subscripts (`a[name]`), and whether it is
    also read inside other subscripts' indices (`out[name * W + j]`: kept there, with its declaration); None when
    it is read anywhere else (as a number), written or declared again."""
    if name in written_names(src, body) or name in _nested_declared(src, body):
        return None
    uses = []
    kept = False
    for ident in descendants(body, "identifier"):
        if src.text(ident) != name or ident.start_byte < declaration.end_byte:
            continue
        if whole_subscript(ident):
            uses.append(ident)
        elif _in_index(ident):
            kept = True
        else:
            return None
    return uses, kept


def _in_index(ident: Node) -> bool:
    """Whether `ident` lies in a subscript's index, within arithmetic (`a[ident * W + j]`)."""
    node = ident.parent
    while node is not None and node.type in ("binary_expression", "parenthesized_expression", "cast_expression"):
        node = node.parent
    return node is not None and node.type == "subscript_argument_list"
