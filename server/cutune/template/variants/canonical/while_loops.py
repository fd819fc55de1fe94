"""while_loops: a stride loop written as `while`, with its index declared before it and stepped last in its body,
written as the `for` loop it is, so the loop transforms read its start, bound and step.

    T i = START;                      for (T i = START; i < BOUND; i += STEP) {
    while (i < BOUND) {         →       BODY
      BODY                            }
      i += STEP;
    }

A `for` loop with no initializer whose index is declared before it (`T i = START; for (; i < BOUND; i += STEP)`)
is the same loop, and becomes the same `for` (there a `continue` takes the step, as it did).

An index may serve several such loops one after another, restarted before each (`i = START2;` then the next
`while`): each becomes a `for` with its own index from its own start, the declaration and the restarts gone.

Refused, with the reason, where the `for` could differ: the index is read or written between its start and the
loop or read after it other than by a later restart, written elsewhere in the body, or a `continue` would skip the
step. The loops of one index are rewritten all or none.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.loops import indented, line_indent, squeezed, touches_memory, written_names

NAME = "while_loops"
_LOOPS = ("for_statement", "for_range_loop", "while_statement", "do_statement")


def while_to_for(model: SourceModel, kernel: str) -> SourceModel | str | None:
    """The model with `kernel`'s stride `while` loops written as `for` loops; why not; None when it has none."""
    if not re.search(r"\bwhile\b|\bfor\s*\(\s*;", kernel_body(model, kernel)):
        return None
    src = KernelSource(model, model.kernel(kernel))
    reasons: list[str] = []
    plans: dict[tuple[int, str], list[_Plan]] = {}  # by (block, index): the loops of one index, in order
    loops = [*src.in_body("while_statement"), *(f for f in src.in_body("for_statement") if _started_before(f))]
    for loop in sorted(loops, key=lambda n: n.start_byte):
        plan = _plan(src, loop)
        if isinstance(plan, str):
            reasons.append(f"the {_kind(loop)} loop at line {src.line(loop)} {plan}")
        elif plan is not None:
            block = plan.loop.parent
            assert block is not None  # _plan found the loop in a block
            plans.setdefault((block.start_byte, plan.var), []).append(plan)
    edits = EditList(src.data)
    done: list[tuple[int, int]] = []
    for group in plans.values():  # in the order of their first loops: an enclosing loop's group before its inner ones
        if any(a <= p.loop.start_byte < b for p in group for a, b in done):
            continue  # inside a loop rewritten here: left as it is
        why = _outside_uses(src, group)
        if why:
            reasons.append(f"the {_kind(group[0].loop)} loop at line {src.line(group[0].loop)} {why}")
            continue
        for plan in group:
            edits.replace(plan.start.start_byte, plan.start.end_byte, "")
            edits.replace(plan.loop.start_byte, plan.loop.end_byte, _for_text(src, plan, group[0].start))
            done.append((plan.loop.start_byte, plan.loop.end_byte))
    if edits.edits:
        return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)
    return "; ".join(reasons) if reasons else None


def _started_before(loop: Node) -> bool:
    """Whether `loop` is a `for` with no initializer but a condition and an update."""
    fields = [loop.child_by_field_name(f) for f in ("initializer", "condition", "update")]
    return fields[0] is None and fields[1] is not None and fields[2] is not None


def _kind(loop: Node) -> str:
    return "while" if loop.type == "while_statement" else "for"


@dataclass(frozen=True)
class _Plan:
    """A stride `while` (or initializer-less `for`) loop over `var`: the statement before it that starts `var` (a
    declaration with a value, or a plain assignment), its step, and the body's statements (a `while` body's less
    its step)."""

    loop: Node
    var: str
    start: Node
    step: str
    statements: list[Node]


def _plan(src: KernelSource, loop: Node) -> _Plan | str | None:
    """The loop's plan, why it cannot be a `for`, or None when it is no stride loop."""
    condition, body = loop.child_by_field_name("condition"), loop.child_by_field_name("body")
    if condition is not None and condition.type == "condition_clause" and condition.named_children:
        condition = condition.named_children[0]  # a while's parentheses
    test = (
        condition.named_children[0]
        if condition is not None and condition.type == "parenthesized_expression"
        else condition
    )
    if test is None or test.type != "binary_expression" or src.field(test, "operator") != "<" or body is None:
        return None
    var = "".join(src.field(test, "left").split())
    block_body = body.type == "compound_statement"
    statements = [c for c in body.named_children if c.type != "comment"] if block_body else []
    if loop.type == "for_statement":  # the update is the step, and the body is all the loop's own
        statements = statements if block_body else [body]
        update = loop.child_by_field_name("update")
        step = _step_expression(src, update, var) if update is not None else None
        statements = [*statements, update] if step is not None and update is not None else statements
    else:
        step = _step(src, statements[-1], var) if statements else None
    if step is None:
        return None  # not stepped last by `var += STEP`: no stride loop
    block = loop.parent
    if block is None or block.type != "compound_statement":
        return "is not a statement of a block"
    siblings = [c for c in block.named_children if c.type != "comment"]
    at = siblings.index(loop)
    start = next((siblings[k] for k in range(at - 1, -1, -1) if _starts(src, siblings[k], var)), None)
    if start is None:
        return f"steps {var}, which is not declared with a value in the same block before it"
    value = _start_value(start)
    read = {src.text(n) for n in descendants(value, "identifier")} if value is not None else set()
    if var in read:
        return f"starts {var} from itself (line {src.line(start)})"
    # the start moves down to the loop: what it reads must hold the same values there
    between = siblings[siblings.index(start) + 1 : at]
    changed = sorted(read & {n for b in between for n in written_names(src, b)})
    if changed:
        return f"starts {var} from {changed[0]}, which changes before the loop"
    if value is not None and touches_memory(src, value) and any(touches_memory(src, b) for b in between):
        return f"starts {var} from memory or a call, and the statements before the loop touch memory or call"
    if var in written_names(src, test) or any(var in written_names(src, s) for s in statements[:-1]):
        return f"changes {var} inside its body besides the last step"
    for c in descendants(body, "continue_statement") if loop.type == "while_statement" else []:
        inner = c.parent
        while inner is not None and inner != loop and inner.type not in _LOOPS:
            inner = inner.parent
        if inner == loop:
            return f"has a `continue` (line {src.line(c)}) that would skip the step"
    if re.search(rf"\b{re.escape(var)}\b", src.field(test, "right")):
        return f"has a bound that reads {var}"
    return _Plan(loop, var, start, step, statements)


def _outside_uses(src: KernelSource, group: list[_Plan]) -> str:
    """Why the index of `group`'s loops (one block's, in order) is used apart from them ('' when it is not): a loop
    has no start of its own, the first start is no declaration, or a statement after it other than the loops and
    their starts names the index."""
    first = group[0].start
    for before, plan in itertools.pairwise(group):
        if plan.start == before.start:  # no restart between them: the loop goes on from where the one before ended
            return (
                f"shares {plan.var} with the loop at line {src.line(plan.loop)}, which goes on from where the loop "
                f"at line {src.line(before.loop)} left it (no restart between them)"
            )
    if first.type != "declaration":
        return f"steps {group[0].var}, which is not declared with a value in the same block before it"
    block = first.parent
    assert block is not None  # a start is a statement of the loop's block
    owned = {(n.start_byte, n.end_byte) for p in group for n in (p.start, p.loop)}
    for s in block.named_children:
        if s.start_byte <= first.start_byte or (s.start_byte, s.end_byte) in owned or s.type == "comment":
            continue
        if any(src.text(n) == group[0].var for n in descendants(s, "identifier")):
            return f"uses {group[0].var} outside the loop (line {src.line(s)})"
    return ""


def _for_text(src: KernelSource, plan: _Plan, declaration: Node) -> str:
    """The `for` loop `plan.loop` is, its index of the type `declaration` gives it."""
    declarator = declaration.children_by_field_name("declarator")[0]
    vtype = src.text(declaration)[: declarator.start_byte - declaration.start_byte].strip()
    vtype = re.sub(r"\bconst\b", "", vtype).strip()
    value = _start_value(plan.start)
    inner_text = ""
    body = plan.loop.child_by_field_name("body")
    if body is not None and body.type != "compound_statement":  # a `for` whose body is one statement
        inner_text = src.text(body)
    elif len(plan.statements) > 1 and body is not None:  # the body's text as written (comments kept), less its indent
        first = body.named_children[0].start_byte
        margin = line_indent(src.data, first)
        lines = src.data[first : plan.statements[-2].end_byte].decode().split("\n")
        inner_text = "\n".join([lines[0]] + [ln[len(margin) :] if ln.startswith(margin) else ln for ln in lines[1:]])
    condition = plan.loop.child_by_field_name("condition")
    assert condition is not None  # _plan read it
    test = src.text(condition.named_children[0] if condition.type != "binary_expression" else condition)
    start = src.text(value) if value is not None else plan.var
    header = f"for ({vtype} {plan.var} = {start}; {test}; {plan.var} += {plan.step}) {{"
    indent = line_indent(src.data, plan.loop.start_byte)
    return indented("\n".join([header, indented(inner_text, "  "), "}"]), indent).lstrip()


def _step(src: KernelSource, statement: Node, var: str) -> str | None:
    """STEP of `var += STEP;` or `var = var + STEP;`, else None."""
    if statement.type != "expression_statement" or not statement.named_children:
        return None
    return _step_expression(src, statement.named_children[0], var)


def _step_expression(src: KernelSource, e: Node, var: str) -> str | None:
    """STEP of `var += STEP` or `var = var + STEP`, else None."""
    if e.type != "assignment_expression" or "".join(src.field(e, "left").split()) != var:
        return None
    right = src.field(e, "right")
    if src.field(e, "operator") == "+=":
        return right
    plus = re.fullmatch(rf"\s*{re.escape(var)}\s*\+\s*(.+)", right, re.DOTALL)
    return plus.group(1) if src.field(e, "operator") == "=" and plus else None


def _starts(src: KernelSource, statement: Node, var: str) -> bool:
    """Whether `statement` is `T var = value;` with that one declarator, or `var = value;`."""
    if statement.type == "expression_statement" and statement.named_children:
        e = statement.named_children[0]
        return (
            e.type == "assignment_expression"
            and src.field(e, "operator") == "="
            and squeezed(src.field(e, "left")) == var
        )
    if statement.type != "declaration":
        return False
    declarators = statement.children_by_field_name("declarator")
    if len(declarators) != 1 or declarators[0].type != "init_declarator":
        return False
    name = declarators[0].child_by_field_name("declarator")
    return name is not None and name.type == "identifier" and src.text(name) == var


def _start_value(start: Node) -> Node | None:
    """The value a start statement gives the index."""
    if start.type == "expression_statement":
        return start.named_children[0].child_by_field_name("right")
    return start.children_by_field_name("declarator")[0].child_by_field_name("value")
