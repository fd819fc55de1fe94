"""loop_exits: a loop's exit at a bound its index only moves towards, written as the bounds check it is, so the
loop forms read a checked stride loop.

    for (int i = 0; i < COUNT; ++i) {           for (int i = 0; i < COUNT; ++i) {
      int c = START + STEP * i;                   int c = START + STEP * i;
      if (c >= BOUND) break;             →        if (c < BOUND) {
      BODY                                          BODY
    }                                             }
                                                }

The index grows (`++i`, `i += S`, S a positive constant or a block or grid size, written directly or through a
local declared once and never written), `c` is the index or a local of
the body declared as it times a positive constant plus a value the loop does not change, and BOUND is such a
value too: once `c >= BOUND` holds it holds for every later iteration, so the iterations the exit skipped do
nothing under the check. A conjunction with a condition the loop does not change (`!TAIL && c >= BOUND`) is
such an exit too. Before the exit the body may only declare locals from arithmetic (no call, no memory read: the
iterations the exit skipped now evaluate them). A `return` is such an exit where the loop is the kernel's last
statement. Refused, with the reason, where a loop has the shape but one of these does not hold.
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
    constant_value,
    indented,
    line_indent,
    local_values,
    macros_expanded,
    squeezed,
    statements_of,
    static_cast_call,
    written_names,
)

NAME = "loop_exits"
_EXIT = re.compile(r"\bif\s*\([^;{}]*\)\s*\{?\s*(?:break|return)\s*;")
_NEGATED = {">=": "<", ">": "<=", "<=": ">", "<": ">="}
_MIRRORED = {">=": "<=", ">": "<", "<=": ">=", "<": ">"}
_BUILTIN_SIZES = re.compile(r"(?:blockDim|gridDim)\.[xyz]")
_BUILTIN = re.compile(r"(?:threadIdx|blockIdx|blockDim|gridDim)\.[xyz]")


class _Refused(Exception):
    """The loop has the shape, but a rewrite could change what it does (the message says why)."""


def exits_to_checks(model: SourceModel, kernel: str) -> SourceModel | str | None:
    """The model with `kernel`'s exits at a monotone bound written as bounds checks; why not; None when it has none."""
    if not _EXIT.search(kernel_body(model, kernel)):
        return None
    src = KernelSource(model, model.kernel(kernel))
    edits = EditList(src.data)
    reasons: list[str] = []
    done: list[tuple[int, int]] = []
    for loop in src.in_body("for_statement"):
        if any(a <= loop.start_byte < b for a, b in done):  # inside a loop rewritten already: its text is replaced
            continue
        try:
            rewrite = _check(src, loop)
        except _Refused as e:
            reasons.append(f"the loop at line {src.line(loop)} {e}")
            continue
        if rewrite is not None:
            edits.replace(*rewrite)
            done.append((loop.start_byte, loop.end_byte))
    if edits.edits:
        return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)
    return "; ".join(reasons) if reasons else None


def _check(src: KernelSource, loop: Node) -> tuple[int, int, str] | None:
    """(start, end, text) replacing the loop body's exit and what follows it by a check; None where the loop has no
    exit at its body's top level; _Refused where it has one this rule cannot take."""
    body = loop.child_by_field_name("body")
    statements = [s for s in statements_of(body) if s.type != "comment"] if body is not None else []
    at = next((n for n, s in enumerate(statements) if _exit_kind(src, s) is not None), None)
    if body is None or body.type != "compound_statement" or at is None:
        return None
    exit_ = statements[at]
    if _exit_kind(src, exit_) == "return" and not _last_of_kernel(src, loop):
        raise _Refused("returns from inside, and statements follow it in the kernel")
    hoisted = _hoisted(src, loop, exit_, statements[:at])
    if hoisted is not None:
        return hoisted
    var = _growing_index(src, loop)
    if var is None:
        raise _Refused("exits, but its index is not one that only grows")
    changed = written_names(src, loop) - {var}
    declared: dict[str, Node] = {}
    for s in statements[:at]:
        if s.type != "declaration" or not _pure(src, s):
            raise _Refused(f"does more than declare arithmetic before its exit (line {src.line(s)})")
        for d in s.children_by_field_name("declarator"):
            name, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
            if name is not None and value is not None and name.type == "identifier":
                declared[src.text(name)] = value
    condition = exit_.child_by_field_name("condition")
    test = condition.named_children[0] if condition is not None and condition.named_children else None
    if test is None:
        return None
    check = _negation(src, test, var, declared, changed)
    if check is None:
        raise _Refused(f"exits on `{squeezed(src.text(test))}`, not at a bound its index only moves towards")
    rest = statements[at + 1 :]
    indent = line_indent(src.data, exit_.start_byte)
    inner = src.data[rest[0].start_byte : rest[-1].end_byte].decode() if rest else ""
    inner = indented(inner.replace("\n" + indent, "\n"), indent + "  ").lstrip() if rest else ""
    end = rest[-1].end_byte if rest else exit_.end_byte
    return exit_.start_byte, end, f"if ({check}) {{\n{indent}  {inner}\n{indent}}}"


def _hoisted(src: KernelSource, loop: Node, exit_: Node, before: list[Node]) -> tuple[int, int, str] | None:
    """(start, end, text) moving a `return` on a condition the loop does not change (`if (b >= B) return;` of a
    batch index, first thing in a grid-stride loop over a row: no name the loop assigns, passes to a call, takes the
    address of or binds a reference to) to just before the loop; None where it is not one.
    The loop is the kernel's last statement and only pure declarations the condition does not read come before
    the exit, so where it holds the original thread returns in its first iteration having done nothing, or runs no
    iteration: either way nothing after; where it does not hold, no iteration leaves. The loop's initializer and
    condition must only compute too, as they now run after the exit's test."""
    condition = exit_.child_by_field_name("condition")
    test = condition.named_children[0] if condition is not None and condition.named_children else None
    if _exit_kind(src, exit_) != "return" or test is None:
        return None
    changed = written_names(src, loop)
    declared = {
        src.text(name)
        for s in before
        for d in s.children_by_field_name("declarator")
        if (name := d.child_by_field_name("declarator")) is not None
    }
    # the update runs only after an iteration, never before the first test of the exit
    header = [h for f in ("initializer", "condition") if (h := loop.child_by_field_name(f)) is not None]
    if any(s.type != "declaration" for s in before) or not all(_pure(src, s) for s in [*before, *header]):
        return None
    names = {src.text(i) for i in descendants(test, "identifier")}
    if not _pure(src, test) or names & (changed | declared) or _aliased(src, loop, names):
        return None
    head = src.data[loop.start_byte : exit_.start_byte].decode("utf-8").rstrip()
    return loop.start_byte, exit_.end_byte, f"{src.text(exit_)}\n{line_indent(src.data, loop.start_byte)}{head}"


def _aliased(src: KernelSource, loop: Node, names: set[str]) -> bool:
    """Whether the loop may change one of `names` other than by assigning it: its address taken, a reference bound
    to it, or passed to a call (which may take it by reference)."""
    for n in descendants(loop, "identifier"):
        parent = n.parent
        if src.text(n) not in names or parent is None:
            continue
        call = parent.parent if parent.type == "argument_list" else None
        if call is not None and not static_cast_call(src, call):
            return True
        if parent.type == "pointer_expression" and src.text(parent)[:1] == "&":
            return True
        if parent.type == "init_declarator" and parent.child_by_field_name("value") == n:
            target = parent.child_by_field_name("declarator")
            if target is not None and target.type == "reference_declarator":
                return True
    return False


def _exit_kind(src: KernelSource, statement: Node) -> str | None:
    """'break' or 'return' for `if (COND) break;` / `return;` (braced or not, no else); None for anything else."""
    then_node = statement.child_by_field_name("consequence")
    if statement.type != "if_statement" or then_node is None or statement.child_by_field_name("alternative"):
        return None
    then = squeezed(src.text(then_node))
    return {"break;": "break", "{break;}": "break", "return;": "return", "{return;}": "return"}.get(then)


def _last_of_kernel(src: KernelSource, loop: Node) -> bool:
    """Whether the loop is the kernel body's last statement."""
    statements = [s for s in src.body.named_children if s.type != "comment"]
    return bool(statements) and statements[-1] == loop


def _growing_index(src: KernelSource, loop: Node) -> str | None:
    """The loop's index where its update only makes it grow (`++i`, `i++`, `i += S`, S positive) and the body never
    writes it."""
    update, body = loop.child_by_field_name("update"), loop.child_by_field_name("body")
    text = squeezed(src.text(update)) if update is not None else ""
    found = re.fullmatch(r"(?:\+\+(\w+)|(\w+)\+\+|(\w+)\+=(.+))", text)
    if found is None:
        return None
    var = next(g for g in found.groups()[:3] if g)
    step = found.group(4)
    # a step held in a local declared once and never written (`const int block_size = blockDim.x;`) is its value
    if step is not None and not _positive(src, local_values(src).get(squeezed(step), step)):
        return None
    return var if body is not None and var not in written_names(src, body) else None


def _positive(src: KernelSource, text: str) -> bool:
    """Whether `text` is a positive constant: literals, the file's integer macros, block and grid sizes, products."""
    sized = _BUILTIN_SIZES.sub("1", text)  # at least 1: positive where only multiplied and added
    if sized != text and re.search(r"[-/%]", macros_expanded(src, sized)):
        return False
    value = constant_value(src, sized)
    return value is not None and value > 0


def _negation(src: KernelSource, test: Node, var: str, declared: dict[str, Node], changed: set[str]) -> str | None:
    """The check that keeps an iteration where the exit `test` does not leave, when `test` holds from some
    iteration on (a bound the index moves towards, or such a bound and a condition the loop does not change);
    None otherwise."""
    while test.type == "parenthesized_expression" and test.named_child_count == 1:
        test = test.named_children[0]
    if test.type != "binary_expression":
        return None
    op = src.field(test, "operator")
    left, right = test.child_by_field_name("left"), test.child_by_field_name("right")
    if left is None or right is None:
        return None
    if op == "&&":  # one side the loop does not change, the other a monotone exit
        for fixed, moving in ((left, right), (right, left)):
            if _invariant(src, fixed, var, changed, declared):
                kept = _negation(src, moving, var, declared, changed)
                if kept is not None:
                    return f"!({squeezed(src.text(fixed))}) || {kept}"
        return None
    if op not in _NEGATED:
        return None
    for x, bound, o in ((left, right, op), (right, left, _MIRRORED[op])):
        if (
            o in (">=", ">")
            and _grows(src, x, var, declared, changed)
            and _invariant(src, bound, var, changed, declared)
        ):
            return f"{src.text(x).strip()} {_NEGATED[o]} {src.text(bound).strip()}"
    return None


def _grows(src: KernelSource, x: Node, var: str, declared: dict[str, Node], changed: set[str]) -> bool:
    """Whether `x` is the index, or a local declared as the index (times a positive constant) plus values the loop
    does not change."""
    text = squeezed(src.text(x))
    if text == var:
        return True
    value = declared.get(text)
    if value is None or value.type != "binary_expression" or src.field(value, "operator") != "+":
        return False
    terms: list[Node] = []
    pending = [value]
    while pending:
        node = pending.pop()
        if node.type == "binary_expression" and src.field(node, "operator") == "+":
            pending += [c for c in (node.child_by_field_name("left"), node.child_by_field_name("right")) if c]
        else:
            terms.append(node)
    moving = [t for t in terms if var in {src.text(i) for i in descendants(t, "identifier")}]
    if len(moving) != 1 or not all(_invariant(src, t, var, changed, declared) for t in terms if t not in moving):
        return False
    scaled = re.fullmatch(
        rf"(?:{re.escape(var)}|{re.escape(var)}\*(.+)|(.+)\*{re.escape(var)})", squeezed(src.text(moving[0]))
    )
    factor = scaled.group(1) or scaled.group(2) if scaled is not None else None
    return scaled is not None and (factor is None or _positive(src, factor))


def _invariant(src: KernelSource, node: Node, var: str, changed: set[str], declared: dict[str, Node]) -> bool:
    """Whether `node` has the same value in every iteration: no call or memory read, no name the loop changes (its
    index, what it writes, what its body declares)."""
    names = {src.text(i) for i in descendants(node, "identifier")}
    return _pure(src, node) and not names & (changed | {var} | declared.keys())


def _pure(src: KernelSource, node: Node) -> bool:
    """Whether `node` only computes: no call but `static_cast`, memory read or write, no member but the thread and
    block builtins'."""
    effects = [
        n
        for n in descendants(
            node, "call_expression", "subscript_expression", "update_expression", "assignment_expression"
        )
        if n.type != "call_expression" or not static_cast_call(src, n)
    ]
    derefs = [p for p in descendants(node, "pointer_expression") if p.children and p.children[0].type == "*"]
    fields = [f for f in descendants(node, "field_expression") if not _BUILTIN.fullmatch(squeezed(src.text(f)))]
    return not effects and not derefs and not fields
