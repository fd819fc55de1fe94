"""loop_temps: a local the kernel declares once and a loop uses only as its own temporary (a statement of the loop's
body sets it, `v = E;`, before any other names it, and nothing after the loop names it) declared in that body
instead, so the loop transforms see a value of each iteration, not one carried across the loops that share the name:

    float val = 0.0f;                          float val = 0.0f;
    for (...) val += x[i];                     for (...) val += x[i];
    ...                                  →     ...
    for (...) {                                for (...) {
      val = x[i] - mean;                         float val = x[i] - mean;
      y[i] = val * r;                            y[i] = val * r;
    }                                          }

Each iteration sets the local before anything reads it, so every read in the body sees what its own iteration set,
and the declaration in the body shadows the outer local for exactly those reads. The outer local would have kept the
last iteration's value: the step requires that nothing after the loop names it, that the loop sits in no other loop
(whose next round would read it), that the loop's header does not name it, and that the kernel never takes its
address nor binds a reference to it (an alias would still see the outer one).
"""

from __future__ import annotations

from collections import Counter

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.loops import statements_of

NAME = "loop_temps"
_LOOPS = ("for_statement", "while_statement", "do_statement", "for_range_loop")
_PLAIN = ("primitive_type", "type_identifier", "sized_type_specifier", "qualified_identifier")
_STORED = {"static", "extern", "__shared__", "__constant__", "volatile"}


def loop_temporaries(model: SourceModel, kernel: str) -> SourceModel | None:
    """The model with `kernel`'s locals that a loop only uses as its temporary declared in that loop; None when none."""
    if not any(word in kernel_body(model, kernel) for word in ("for", "while")):
        return None
    src = KernelSource(model, model.kernel(kernel))
    types = _plain_locals(src)
    edits = EditList(src.data)
    for loop in src.in_body(*_LOOPS):
        for name, statement, value in _first_assignments(src, loop):
            if name in types and _only_temporary(src, loop, name, value):
                edits.replace(statement.start_byte, statement.start_byte, f"{types[name]} ")
    if not edits.edits:
        return None
    return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)


def _plain_locals(src: KernelSource) -> dict[str, str]:
    """The kernel body's top-level locals declared once in the body, of a plain type (no pointer, array, reference,
    `static` or `__shared__`), by name: their type's text."""
    seen: Counter[str] = Counter()
    plain: dict[str, str] = {}
    for d in descendants(src.body, "declaration"):
        names = [n for n in (_declared(c) for c in d.children_by_field_name("declarator")) if n is not None]
        seen.update(names)
        kind = d.child_by_field_name("type")
        if kind is None or kind.type not in _PLAIN or d.parent != src.body:
            continue
        if set(src.data[d.start_byte : kind.start_byte].decode("utf-8").split()) & _STORED:
            continue
        plain.update((n, src.text(kind)) for n in names)
    return {n: t for n, t in plain.items() if seen[n] == 1}


def _declared(declarator: Node) -> str | None:
    """The name an identifier or `name = value` declarator declares; None for pointers, arrays and references."""
    if declarator.type == "init_declarator":
        declarator = declarator.child_by_field_name("declarator") or declarator
    return declarator.text.decode("utf-8") if declarator.type == "identifier" and declarator.text else None


def _first_assignments(src: KernelSource, loop: Node) -> list[tuple[str, Node, Node]]:
    """(name, statement, value) of each statement `name = value;` of the loop's body that no earlier statement of
    the body names `name` before: every read of it in an iteration comes after that iteration set it."""
    body = loop.child_by_field_name("body")
    if body is None or body.type != "compound_statement":
        return []
    found: list[tuple[str, Node, Node]] = []
    named: set[str] = set()  # the names the statements so far mention
    for statement in (s for s in statements_of(body) if s.type != "comment"):
        assignment = (
            statement.named_children[0]
            if statement.type == "expression_statement" and statement.named_children
            else None
        )
        if (
            assignment is not None
            and assignment.type == "assignment_expression"
            and src.field(assignment, "operator") == "="
        ):
            left, right = assignment.child_by_field_name("left"), assignment.child_by_field_name("right")
            if left is not None and right is not None and left.type == "identifier" and src.text(left) not in named:
                found.append((src.text(left), statement, right))
        named |= {src.text(i) for i in [statement, *descendants(statement, "identifier")] if i.type == "identifier"}
    return found


def _only_temporary(src: KernelSource, loop: Node, name: str, value: Node) -> bool:
    """Whether `loop` may hold its own `name`: the value it is first set to does not read it, the header does not
    name it, no loop encloses this one, nothing after the loop names it, and the kernel never aliases it."""
    if any(src.text(i) == name for i in descendants(value, "identifier")):
        return False
    body = loop.child_by_field_name("body")
    header = [c for c in loop.children if c != body]
    if any(src.text(i) == name for h in header for i in [h, *descendants(h, "identifier")] if i.type == "identifier"):
        return False
    parent = loop.parent
    while parent is not None and parent != src.body:
        if parent.type in _LOOPS:
            return False
        parent = parent.parent
    for ident in descendants(src.body, "identifier"):
        if src.text(ident) != name:
            continue
        if ident.start_byte >= loop.end_byte:
            return False
        above = ident.parent
        if above is not None and above.type == "pointer_expression" and src.text(above).startswith("&"):
            return False
        if above is not None and above.type == "reference_declarator":
            return False
        if above is not None and above.type == "init_declarator" and above.child_by_field_name("value") == ident:
            target = above.child_by_field_name("declarator")
            if target is not None and target.type == "reference_declarator":
                return False
    return True
