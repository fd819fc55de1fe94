"""while_loops: a stride loop written as `while`, with its index declared before it and stepped last in its body,
written as the `for` loop it is, so the loop transforms read its start, bound and step.

    T i = START;                      for (T i = START; i < BOUND; i += STEP) {
    while (i < BOUND) {         →       BODY
      BODY                            }
      i += STEP;
    }

Refused, with the reason, where the `for` could differ: the index is read or written between its declaration
and the loop or read after it, written elsewhere in the body, or a `continue` would skip the step.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.loops import indented, line_indent, written_names

NAME = "while_loops"
_LOOPS = ("for_statement", "for_range_loop", "while_statement", "do_statement")


def while_to_for(model: SourceModel, kernel: str) -> SourceModel | str | None:
    """The model with `kernel`'s stride `while` loops written as `for` loops; why not; None when it has none."""
    if "while" not in kernel_body(model, kernel):
        return None
    src = KernelSource(model, model.kernel(kernel))
    edits = EditList(src.data)
    reasons: list[str] = []
    done: list[tuple[int, int]] = []
    for loop in src.in_body("while_statement"):
        if any(a <= loop.start_byte < b for a, b in done):
            continue  # inside a loop rewritten here: left as it is
        result = _rewrite(src, loop)
        if isinstance(result, str):
            reasons.append(f"the while loop at line {src.line(loop)} {result}")
        elif result is not None:
            for start, end, text in result:
                edits.replace(start, end, text)
            done.append((loop.start_byte, loop.end_byte))
    if edits.edits:
        return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)
    return "; ".join(reasons) if reasons else None


def _rewrite(src: KernelSource, loop: Node) -> list[tuple[int, int, str]] | str | None:
    """The edits (remove the declaration, replace the loop), why not, or None when it is no stride loop."""
    condition, body = loop.child_by_field_name("condition"), loop.child_by_field_name("body")
    test = condition.named_children[0] if condition is not None and condition.named_children else None
    if test is None or test.type != "binary_expression" or src.field(test, "operator") != "<" or body is None:
        return None
    var = "".join(src.field(test, "left").split())
    statements = [c for c in body.named_children if c.type != "comment"] if body.type == "compound_statement" else []
    step = _step(src, statements[-1], var) if statements else None
    if step is None:
        return None  # not stepped last by `var += STEP`: no stride loop
    block = loop.parent
    if block is None or block.type != "compound_statement":
        return "is not a statement of a block"
    siblings = [c for c in block.named_children if c.type != "comment"]
    at = siblings.index(loop)
    declared = next((k for k in range(at - 1, -1, -1) if _declares(src, siblings[k], var)), None)
    if declared is None:
        return f"steps {var}, which is not declared with a value in the same block before it"
    declaration = siblings[declared]
    for s in (*siblings[declared + 1 : at], *siblings[at + 1 :]):
        if any(src.text(n) == var for n in descendants(s, "identifier")):
            return f"uses {var} outside the loop (line {src.line(s)})"
    if var in written_names(src, test) or any(var in written_names(src, s) for s in statements[:-1]):
        return f"changes {var} inside its body besides the last step"
    for c in descendants(body, "continue_statement"):
        inner = c.parent
        while inner is not None and inner != loop and inner.type not in _LOOPS:
            inner = inner.parent
        if inner == loop:
            return f"has a `continue` (line {src.line(c)}) that would skip the step"
    if re.search(rf"\b{re.escape(var)}\b", src.field(test, "right")):
        return f"has a bound that reads {var}"
    declarator = declaration.children_by_field_name("declarator")[0]
    value = declarator.child_by_field_name("value")
    vtype = src.text(declaration)[: declarator.start_byte - declaration.start_byte].strip()
    vtype = re.sub(r"\bconst\b", "", vtype).strip()
    inner_text = ""
    if len(statements) > 1:  # the body's text as written (comments kept), less its own indent
        first = body.named_children[0].start_byte
        margin = line_indent(src.data, first)
        lines = src.data[first : statements[-2].end_byte].decode().split("\n")
        inner_text = "\n".join([lines[0]] + [ln[len(margin) :] if ln.startswith(margin) else ln for ln in lines[1:]])
    header = f"for ({vtype} {var} = {src.text(value) if value else var}; {src.text(test)}; {var} += {step}) {{"
    indent = line_indent(src.data, loop.start_byte)
    text = indented("\n".join([header, indented(inner_text, "  "), "}"]), indent).lstrip()
    return [(declaration.start_byte, declaration.end_byte, ""), (loop.start_byte, loop.end_byte, text)]


def _step(src: KernelSource, statement: Node, var: str) -> str | None:
    """STEP of `var += STEP;` or `var = var + STEP;`, else None."""
    if statement.type != "expression_statement" or not statement.named_children:
        return None
    e = statement.named_children[0]
    if e.type != "assignment_expression" or "".join(src.field(e, "left").split()) != var:
        return None
    right = src.field(e, "right")
    if src.field(e, "operator") == "+=":
        return right
    plus = re.fullmatch(rf"\s*{re.escape(var)}\s*\+\s*(.+)", right, re.DOTALL)
    return plus.group(1) if src.field(e, "operator") == "=" and plus else None


def _declares(src: KernelSource, statement: Node, var: str) -> bool:
    """Whether `statement` is `T var = value;` with that one declarator."""
    if statement.type != "declaration":
        return False
    declarators = statement.children_by_field_name("declarator")
    if len(declarators) != 1 or declarators[0].type != "init_declarator":
        return False
    name = declarators[0].child_by_field_name("declarator")
    return name is not None and name.type == "identifier" and src.text(name) == var
