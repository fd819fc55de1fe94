"""template_args: the kernel read at the spec's instantiation, its template parameters' constants folded where they
pick between forms inside expressions (llama.cpp's `ncols_template == 0 ? p.ncols : ncols_template`,
`use_shared ? buf : dst`):

    const int n = NT == 0 ? p.n : NT;                const int n = p.n;
    if (NT == 0 && col >= n) break;          →       if (col >= n) break;        (at NT = 0)
    if (NT != 0 && c >= NT) return;                  (gone: `if (false) ...`)

An integral or boolean template argument is a constant of the instantiation: every thread of every block reads the
same value, so a condition over such arguments and literals alone is the same everywhere, and the code it does not
pick never runs. The step folds `C ? a : b`, `C && x` and `C || x` where C reads only such arguments, and an `if`
such a fold decided, repeatedly. An `if` on the arguments themselves stays: the transforms read its arms one at a
time (constexpr_arms.py), and their variants then fit every instantiation. The transforms then read the body of
this instantiation only: each variant is kept under `if constexpr` on the arguments it was read at, every other
instantiation running the original body (`specialised`); the launch of such a variant is written only at
launches of that instantiation (apply/dispatch.py).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.errors import ExpressionError
from cutune.template.edits import EditList, apply_edits
from cutune.template.expr import compile_expr
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.model import Variant

NAME = "template_args"
_ROUNDS = 8  # folds that expose others (a ternary inside a condition) are read again, this many times at most
_INTEGER = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*")


def literal_value(text: str) -> int | None:
    """The value of an integer or boolean literal (`0`, `128u`, `true`); None for any other text."""
    text = text.strip()
    if text in ("true", "false"):
        return int(text == "true")
    if not _INTEGER.fullmatch(text):
        return None
    digits = text.rstrip("uUlL")
    # base 0 reads hex; a decimal with leading zeros (`08`, octal in C++ only when its digits allow) is not taken
    try:
        return int(digits, 0)
    except ValueError:
        return None


def constants(model: SourceModel, kernel: str, args: Mapping[str, str]) -> dict[str, int]:
    """The kernel's template parameters whose spec argument is an integer or boolean literal, with its value."""
    found: dict[str, int] = {}
    for param in model.kernel(kernel).template_params:
        value = literal_value(str(args.get(param.name, "")))
        if value is not None:
            found[param.name] = value
    return found


def fold_template_args(model: SourceModel, kernel: str, args: Mapping[str, str]) -> SourceModel | None:
    """The model with `kernel`'s conditions over its constant template arguments folded; None when none is."""
    values = constants(model, kernel, args)
    if not values or not any(re.search(rf"\b{re.escape(n)}\b", kernel_body(model, kernel)) for n in values):
        return None
    current, folded = model, False
    for _ in range(_ROUNDS):
        src = KernelSource(current, current.kernel(kernel))
        edits = _folds(src, values)
        if not edits.edits:
            break
        current = parse_source(apply_edits(current.text, edits.edits), current.path, rewrite=True)
        folded = True
    return current if folded else None


def instantiation(model: SourceModel, kernel: str, args: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The spec's constant template arguments the step read the kernel at: (parameter, argument as written)."""
    return tuple((name, str(args[name]).strip()) for name in constants(model, kernel, args))


def specialised(variant: Variant, at: tuple[tuple[str, str], ...], original: str) -> Variant:
    """`variant` read at the instantiation `at`: its body under `if constexpr` on those arguments, the original body
    for every other instantiation."""
    condition = " && ".join(f"({name} == {value})" for name, value in at)
    body = "\n".join([f"if constexpr ({condition}) {{", variant.body, "} else {", original, "}"])
    own = tuple(a for a in variant.instantiation if a[0] not in dict(at))  # read at one arm of its own (row_reduce)
    return dataclasses.replace(variant, body=body, instantiation=(*at, *own))


def _folds(src: KernelSource, values: dict[str, int]) -> EditList:
    """One round of folds: the outermost decidable conditions of the body."""
    edits = EditList(src.data)
    taken: list[tuple[int, int]] = []
    for node in src.in_body("conditional_expression", "binary_expression", "if_statement"):
        if any(a <= node.start_byte < b for a, b in taken):
            continue
        replacement = _fold(src, node, values)
        if replacement is not None:  # the lines after it keep their numbers: the refusals name the file's
            lost = src.text(node).count("\n") - replacement.count("\n")
            edits.replace(node.start_byte, node.end_byte, replacement + "\n" * max(lost, 0))
            taken.append((node.start_byte, node.end_byte))
    return edits


def _fold(src: KernelSource, node: Node, values: dict[str, int]) -> str | None:
    """The text replacing `node` where its condition is decidable; None where it is not, or is not a choice."""
    if node.type == "conditional_expression":
        value = _value(src, node.child_by_field_name("condition"), values)
        kept = node.child_by_field_name("consequence" if value else "alternative")
        return f"({src.text(kept)})" if value is not None and kept is not None else None
    if node.type == "binary_expression" and src.field(node, "operator") in ("&&", "||"):
        conjunction = src.field(node, "operator") == "&&"
        for side, other in (("left", "right"), ("right", "left")):
            value = _value(src, node.child_by_field_name(side), values)
            rest = node.child_by_field_name(other)
            if value is None or rest is None:
                continue
            if bool(value) != conjunction:  # `false && x`, `true || x`: decided without x, which C++ skips too
                return "true" if value else "false"
            return f"({src.text(rest)})"
        return None
    if node.type == "if_statement":
        # an `if` on the arguments themselves is left to the arms the transforms read (constexpr_arms.py), whose
        # variants fit every instantiation; one an expression fold left decided (`if (false) break;`) goes
        condition = node.child_by_field_name("condition")
        decided = src.text(condition).strip("() \n") if condition is not None else ""
        if decided not in ("true", "false"):
            return None
        kept = node.child_by_field_name("consequence" if decided == "true" else "alternative")
        if kept is not None and kept.type == "else_clause":
            kept = next(iter(kept.named_children), None)
        if kept is None:
            return ";"
        # braced, so declarations of the arm stay in their scope
        return src.text(kept) if kept.type == "compound_statement" else f"{{ {src.text(kept)} }}"
    return None


def _value(src: KernelSource, node: Node | None, values: dict[str, int]) -> int | None:
    """The value of a condition over the constant template arguments and literals alone; None otherwise."""
    if node is None or descendants(node, "call_expression", "field_expression", "subscript_expression"):
        return None
    bare = src.text(node).strip("() \n")
    if bare in ("true", "false"):  # what an earlier round folded a condition to
        return int(bare == "true")
    names = {src.text(i) for i in [node, *descendants(node, "identifier")] if i.type == "identifier"}
    if not names or not names <= values.keys():  # a template argument's constant, not any literal condition
        return None
    text = " ".join(src.text(node).split())
    text = re.sub(r"\btrue\b", "1", re.sub(r"\bfalse\b", "0", text))
    text = text.replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"!(?!=)", " not ", text)
    try:
        expr = compile_expr(text)
        value = expr.evaluate({n: values[n] for n in names if n in values})
    except (ExpressionError, KeyError, ZeroDivisionError, TypeError, ValueError):
        return None
    return int(bool(value))
