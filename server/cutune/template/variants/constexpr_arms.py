"""constexpr_arms: a kernel whose body branches at its top level on `if constexpr (C)` around row loops, read one arm
at a time.

`if constexpr` takes a constant expression: every thread of every block of one instantiation runs the same arm, and
the other arm is not even compiled. So the kernel an instantiation runs is the body with each such statement
replaced by its arm; a transform reads the two bodies (C true, C false) each as a kernel of its own, and its variant
keeps the `if constexpr`, each arm's rewrite in its arm. Every `if constexpr` on the same condition (or its
negation, `!C`) is resolved with it, also inside loops (there the kept arm keeps its braces; at the top level its
statements become the body's), so the arms are the bodies an instantiation compiles; one on another condition is
left to the next reading of each arm. The condition must not read the body's locals (the variant tests it before
them). The discarded code is blanked, not removed, so the lines the refusals name stay the file's.

template_arms reads any `if` whose condition names only the kernel's template parameters the same way, plain or
`if constexpr`, wherever it sits (a helper's branch inlined into a loop): a constant of the instantiation too.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.cuda.syntax import node_text
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.loops import declaration_names, declared_names
from cutune.template.variants.model import Variant

_SPACE = re.compile(r"\s+")
_LOOPS = ("for_statement", "while_statement", "do_statement")


@dataclass(frozen=True)
class Arms:
    """A kernel's body read at both values of one `if constexpr` condition."""

    condition: str  # as written, without its parentheses
    line: int  # of the first top-level `if constexpr` on it holding a loop (1-based)
    models: tuple[SourceModel, SourceModel]  # the file with every such statement resolved true, then false


def constexpr_arms(src: KernelSource) -> Arms | str | None:
    """`src`'s body resolved both ways on the condition of its first top-level `if constexpr` that holds a loop;
    why it cannot be (an arm declares a name twice once its braces are gone); None where there is none."""
    statements = [s for s in src.body.named_children if s.type == "if_statement"]
    first = next((s for s in statements if _is_constexpr(s) and descendants(s, *_LOOPS)), None)
    if first is None:
        return None
    base, _ = _polarity(_condition(first))
    condition = node_text(src.data, base)
    local = next((n for n in _identifiers(src, base) if n in declared_names(src, src.body)), None)
    if local is not None:  # the variant tests the condition before any of the body's declarations
        return f"`if constexpr ({condition})` (line {src.line(first)}) reads `{local}`, a local of the kernel"
    return _arms(src, first, condition, constexpr_only=True)


def template_arms(src: KernelSource, near: int | None = None) -> Arms | str | None:
    """`src`'s body resolved both ways on the condition of its first `if` (plain or `if constexpr`, anywhere in the
    body: a helper's branch inlined into a loop) that reads only the kernel's template parameters: a constant of the
    instantiation, so each instantiation runs one arm as surely as under `if constexpr`; every `if` on the same
    condition is resolved with it. With `near` (a line), only an `if` in the innermost loop around that line, or around
    the line itself where no loop is. Why it cannot be; None where there is no such `if`."""
    params = {p.name for p in src.kernel.template_params}
    declared = declared_names(src, src.body)
    first = None
    for s in src.in_body("if_statement") if near is None else _around(src, near):
        base, _ = _polarity(_condition(s))
        names = set(_identifiers(src, base))
        calls = descendants(base, "call_expression", "field_expression", "subscript_expression")
        if names and names <= params and not names & declared and not calls:
            first = s
            break
    if first is None:
        return None
    base, _ = _polarity(_condition(first))
    return _arms(src, first, node_text(src.data, base), constexpr_only=False)


def _around(src: KernelSource, line: int) -> list[Node]:
    """The `if` statements of the innermost loop whose lines hold `line`, else of those whose own lines do."""

    def holds(node: Node) -> bool:
        return node.start_point[0] + 1 <= line <= node.end_point[0] + 1

    loops = [n for n in src.in_body(*_LOOPS) if holds(n)]
    if loops:
        inner = min(loops, key=lambda n: n.end_byte - n.start_byte)
        return [s for s in src.in_body("if_statement") if inner.start_byte <= s.start_byte < inner.end_byte]
    return [s for s in src.in_body("if_statement") if holds(s)]


def _arms(src: KernelSource, first: Node, condition: str, *, constexpr_only: bool) -> Arms | str:
    """The body resolved both ways on `condition` (each `if` on it, only `if constexpr`s where `constexpr_only`)."""
    models: list[SourceModel] = []
    for value in (True, False):
        edits = EditList(src.data)
        done: list[Node] = []  # resolved already: one inside another's arm is resolved with it, or blanked
        for s in src.in_body("if_statement"):
            if (constexpr_only and not _is_constexpr(s)) or any(
                d.start_byte <= s.start_byte < d.end_byte for d in done
            ):
                continue
            other, negated = _polarity(_condition(s))
            if _SPACE.sub("", node_text(src.data, other)) != _SPACE.sub("", condition):
                continue
            kept = _kept(s, value != negated)
            unwrap = s.parent == src.body and kept is not None and kept.type == "compound_statement"
            if unwrap and kept is not None:  # its declarations become the body's: nothing after it may see them
                later = {n for t in src.body.named_children if t.start_byte >= s.end_byte for n in _identifiers(src, t)}
                seen = sorted(
                    later
                    & {n for d in kept.named_children if d.type == "declaration" for n in declaration_names(src, d)}
                )
                if seen:
                    return (
                        f"where `{condition}` (line {src.line(first)}) is {str(value).lower()}, the arm at line "
                        f"{src.line(s)} declares `{seen[0]}`, a name the statements after it read"
                    )
            _resolve(src, s, kept, edits, unwrap)
            done.append(s)
        model = parse_source(apply_edits(src.model.text, edits.edits), src.model.path, rewrite=True)
        twice = _declared_twice(KernelSource(model, model.kernel(src.kernel.name)))
        if twice:
            return (
                f"where `{condition}` (line {src.line(first)}) is {str(value).lower()}, its arm declares `{twice}` "
                "that the kernel's body declares too"
            )
        models.append(model)
    return Arms(condition, src.line(first), (models[0], models[1]))


def joined(arms: Arms, yes: Variant, no: Variant) -> Variant | str:
    """One variant holding `yes` where the condition holds and `no` where not; why not, where the two need
    different parameters, constraints, launches or helpers (one instantiation of the kernel has one of each)."""
    for what, a, b in (
        ("parameters", yes.params, no.params),
        ("constraints", yes.constraints, no.constraints),
        ("launches", yes.launch, no.launch),
        ("helpers", yes.helpers, no.helpers),
        ("instantiations", yes.instantiation, no.instantiation),
    ):
        if a != b:
            return f"the arms of `if constexpr ({arms.condition})` (line {arms.line}) need different {what}"
    body = branched(arms, yes.body, no.body)
    note = (
        yes.provenance.note
        if yes.provenance.note == no.provenance.note
        else (f"where {arms.condition}: {yes.provenance.note}; else: {no.provenance.note}")
    )
    return dataclasses.replace(yes, body=body, provenance=dataclasses.replace(yes.provenance, note=note))


def one_arm(arms: Arms, value: bool, variant: Variant, original: str) -> Variant | str:
    """`variant`, read where `arms.condition` is `value`, kept for those instantiations only: under `if constexpr`
    on it, the `original` body for the others, and read at that instantiation (`Variant.instantiation`: apply writes its
    launch only at launches of it). Why not, where the condition is not one boolean template parameter (a launch names
    the instantiation it runs by its template arguments)."""
    if not re.fullmatch(r"[A-Za-z_]\w*", arms.condition):
        where = f"`{arms.condition}` (line {arms.line}) is {str(value).lower()}"
        return f"applies only where {where}, not one template argument"
    test = arms.condition if value else f"!{arms.condition}"
    body = "\n".join([f"if constexpr ({test}) {{", _indent(variant.body), "} else {", _indent(original), "}"])
    at = ((arms.condition, str(value).lower()), *(a for a in variant.instantiation if a[0] != arms.condition))
    note = f"where {arms.condition} is {str(value).lower()}: {variant.provenance.note}"
    return dataclasses.replace(
        variant, body=body, instantiation=at, provenance=dataclasses.replace(variant.provenance, note=note)
    )


def branched(arms: Arms, yes: str, no: str) -> str:
    """`if constexpr (C) { yes } else { no }`, the bodies indented."""
    return "\n".join([f"if constexpr ({arms.condition}) {{", _indent(yes), "} else {", _indent(no), "}"])


def _is_constexpr(statement: Node) -> bool:
    return any(c.type == "constexpr" for c in statement.children)


def _condition(statement: Node) -> Node:
    clause = statement.child_by_field_name("condition")
    assert clause is not None  # an if statement always has one
    inner = clause.child_by_field_name("value") or next(iter(clause.named_children), None)
    return inner if inner is not None else clause


def _polarity(condition: Node) -> tuple[Node, bool]:
    """A condition without its outer parentheses and `!`s, and whether those negate it."""
    negated = False
    while True:
        operator = condition.child_by_field_name("operator")
        if condition.type == "unary_expression" and operator is not None and operator.type == "!":
            argument = condition.child_by_field_name("argument")
            assert argument is not None  # a unary expression always has one
            condition, negated = argument, not negated
        elif condition.type == "parenthesized_expression" and condition.named_child_count == 1:
            condition = condition.named_children[0]
        else:
            return condition, negated


def _kept(statement: Node, value: bool) -> Node | None:
    """The arm of an if statement that `value` picks (None: no else)."""
    kept = statement.child_by_field_name("consequence" if value else "alternative")
    if kept is not None and kept.type == "else_clause":
        kept = next(iter(kept.named_children), None)
    return kept


def _resolve(src: KernelSource, statement: Node, kept: Node | None, edits: EditList, unwrap: bool) -> None:
    """Blank `statement` but for its arm `kept`; `unwrap`: that arm's own braces too (at the body's top level,
    where its statements become the body's)."""
    if kept is None:
        _blank(src, statement.start_byte, statement.end_byte, edits)
        return
    start, end = kept.start_byte, kept.end_byte
    if unwrap:
        start, end = start + 1, end - 1
    _blank(src, statement.start_byte, start, edits)
    _blank(src, end, statement.end_byte, edits)


def _blank(src: KernelSource, start: int, end: int, edits: EditList) -> None:
    """Spaces over [start, end), its line breaks kept."""
    if end > start:
        text = src.data[start:end].decode("utf-8")
        edits.replace(start, end, re.sub(r"[^\n]", " ", text))


def _declared_twice(src: KernelSource) -> str:
    """A name two top-level declarations of the body declare, or ""."""
    seen: set[str] = set()
    for decl in src.body.named_children:
        for name in declaration_names(src, decl) if decl.type == "declaration" else []:
            if name in seen:
                return name
            seen.add(name)
    return ""


def _identifiers(src: KernelSource, node: Node) -> list[str]:
    return [node_text(src.data, i) for i in descendants(node, "identifier")]


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" if line else line for line in text.split("\n"))
