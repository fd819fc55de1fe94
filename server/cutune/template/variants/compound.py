"""Compound accumulators split into their parts, so a row reduction of a `float2` (the mean and the mean of
squares of a LayerNorm, summed together) reads as two scalar reductions row_reduce can keep apart.

`float2 acc = make_float2(a, b);` (or `{a, b}`) becomes `float acc_x = a, acc_y = b;`, every `acc.x` / `acc.y`
becomes `acc_x` / `acc_y`, and the statements that move the whole value are written once per part: `acc =
f(acc);` (a reduction helper: sums, maxima and minima of a pair are taken part by part; never inside a loop that
updates the parts, where it would act element by element), `s[i] = acc;` and `acc = s[j];` with `s` a `__shared__`
array of the pair type, which becomes one array per part. Any other use of the whole value (passed to a helper with
other arguments, copied, compared) leaves the kernel as it is. row_reduce then keeps only the loops and the values
computed from the reduced totals: a whole-pair move between the loops must be one of the reductions it identifies.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource, descendants

# pair types and the scalar type of their parts
_PAIRS = {"float2": "float", "double2": "double"}
_MAKERS = {"make_float2", "make_double2"}
_PARTS = ("x", "y")


@dataclass(frozen=True)
class _Pair:
    """One compound accumulator: its declaration, name and scalar part type."""

    declaration: Node
    name: str
    scalar: str
    values: tuple[str, str]


def split_compound_accumulators(src: KernelSource) -> str | None:
    """The file's text with the kernel's pair accumulators split into scalar parts; None when it has none, or
    when one is used whole in a way the split cannot follow."""
    pairs = [p for s in src.body.named_children if (p := _pair(src, s)) is not None]
    if not pairs:
        return None
    shared = _shared_pairs(src)
    edits = EditList(src.data)
    moves: list[Node] = []  # whole-pair statements, each written once per part
    for pair in pairs:
        parts = ", ".join(f"{pair.name}_{c} = {v}" for c, v in zip(_PARTS, pair.values, strict=True))
        edits.replace(pair.declaration.start_byte, pair.declaration.end_byte, f"{pair.scalar} {parts};")
        for ident in descendants(src.body, "identifier"):
            if src.text(ident) != pair.name or _inside(ident, pair.declaration):
                continue
            parent = ident.parent
            if parent is not None and parent.type == "field_expression" and src.field(parent, "field") in _PARTS:
                edits.replace(parent.start_byte, parent.end_byte, f"{pair.name}_{src.field(parent, 'field')}")
                continue
            statement = _whole_move(src, ident, pair.name, shared)
            if statement is None or _in_accumulating_loop(src, statement, pair.name):
                return None
            if all(m.start_byte != statement.start_byte for m in moves):
                moves.append(statement)
    renamed = {pair.name for pair in pairs}
    arrays = {src.text(i) for m in moves for i in descendants(m, "identifier") if src.text(i) in shared}
    for ident in src.in_body("identifier"):
        if src.text(ident) in arrays and not any(_inside(ident, n) for n in (*moves, shared[src.text(ident)][0])):
            return None  # the shared array is read elsewhere as a pair
    for statement in moves:
        split = " ".join(_per_part(src, statement, renamed | arrays, part) for part in range(len(_PARTS)))
        edits.replace(statement.start_byte, statement.end_byte, "{ " + split + " }")
    for name in sorted(arrays):
        declaration, scalar, size = shared[name]
        parts = " ".join(f"__shared__ {scalar} {name}_{c}[{size}];" for c in _PARTS)
        edits.replace(declaration.start_byte, declaration.end_byte, parts)
    return apply_edits(src.model.text, edits.edits)


def _in_accumulating_loop(src: KernelSource, statement: Node, name: str) -> bool:
    """Whether `statement` sits in a loop that also updates the pair's parts: there a helper of the whole pair
    runs element by element, and taking it part by part could change what it computes."""
    node = statement.parent
    while node is not None and node != src.body:
        if node.type in ("for_statement", "while_statement", "do_statement") and any(
            src.text(f.child_by_field_name("argument") or f) == name for f in descendants(node, "field_expression")
        ):
            return True
        node = node.parent
    return False


def _inside(node: Node, outer: Node) -> bool:
    return outer.start_byte <= node.start_byte < outer.end_byte


def _pair(src: KernelSource, statement: Node) -> _Pair | None:
    """`float2 acc = make_float2(a, b);` (or `= {a, b}`) as a pair accumulator; else None."""
    if statement.type != "declaration":
        return None
    scalar = _PAIRS.get(src.field(statement, "type").strip())
    declarators = statement.children_by_field_name("declarator")
    if scalar is None or len(declarators) != 1 or declarators[0].type != "init_declarator":
        return None
    if any(c.type in ("type_qualifier", "storage_class_specifier") for c in statement.children):
        return None  # const, static, __shared__: not a per-thread accumulator
    name, value = declarators[0].child_by_field_name("declarator"), declarators[0].child_by_field_name("value")
    if name is None or value is None or name.type != "identifier":
        return None
    if value.type == "call_expression" and src.field(value, "function") in _MAKERS:
        arguments = value.child_by_field_name("arguments")
        args = [a for a in arguments.named_children if a.type != "comment"] if arguments is not None else []
    elif value.type == "initializer_list":
        args = [a for a in value.named_children if a.type != "comment"]
    else:
        return None
    if len(args) != 2:
        return None
    return _Pair(statement, src.text(name), scalar, (src.text(args[0]), src.text(args[1])))


def _shared_pairs(src: KernelSource) -> dict[str, tuple[Node, str, str]]:
    """`__shared__ float2 s[N];` arrays of the kernel: name → (declaration, scalar type, N)."""
    found: dict[str, tuple[Node, str, str]] = {}
    for d in src.in_body("declaration"):
        scalar = _PAIRS.get(src.field(d, "type").strip())
        declarators = d.children_by_field_name("declarator")
        if scalar is None or len(declarators) != 1 or declarators[0].type != "array_declarator":
            continue
        if "__shared__" not in (src.text(c) for c in d.children) or "extern" in src.text(d).split():
            continue
        name, size = declarators[0].child_by_field_name("declarator"), declarators[0].child_by_field_name("size")
        if name is not None and size is not None and name.type == "identifier":
            found[src.text(name)] = (d, scalar, src.text(size))
    return found


def _whole_move(src: KernelSource, ident: Node, name: str, shared: dict[str, tuple[Node, str, str]]) -> Node | None:
    """The statement that moves the whole pair at `ident`: `acc = f(acc);` (acc its only argument), `s[i] = acc;` or
    `acc = s[j];` with s a shared pair array; else None."""
    statement = ident.parent
    while statement is not None and statement.type != "expression_statement":
        statement = statement.parent
    expr = statement.named_children[0] if statement is not None and statement.named_children else None
    if statement is None or expr is None or expr.type != "assignment_expression" or src.field(expr, "operator") != "=":
        return None
    left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
    if left is None or right is None:
        return None
    if left.type == "identifier" and src.text(left) == name:
        if right.type == "call_expression":
            arguments = right.child_by_field_name("arguments")
            args = [a for a in arguments.named_children if a.type != "comment"] if arguments is not None else []
            if len(args) == 1 and src.text(args[0]) == name:
                return statement
        if _pair_value(src, right, name, shared):
            return statement
        return None
    if _shared_element(src, left, shared) and right.type == "identifier" and src.text(right) == name:
        return statement
    return None


def _pair_value(src: KernelSource, node: Node, name: str, shared: dict[str, tuple[Node, str, str]]) -> bool:
    """Whether `node` is a pair value the split can write per part: the pair, a shared pair element, a
    `make_float2(a, b)`, or a choice (`c ? u : v`) between such values on a condition that reads no pair."""
    if node.type == "parenthesized_expression" and len(node.named_children) == 1:
        return _pair_value(src, node.named_children[0], name, shared)
    if node.type == "identifier":
        return src.text(node) == name
    if node.type == "conditional_expression":
        cond = node.child_by_field_name("condition")
        branches = [node.child_by_field_name(f) for f in ("consequence", "alternative")]
        names = {src.text(i) for i in descendants(cond, "identifier")} if cond is not None else {name}
        return not names & ({name} | shared.keys()) and all(
            b is not None and _pair_value(src, b, name, shared) for b in branches
        )
    return _shared_element(src, node, shared) or _made(src, node) is not None


def _made(src: KernelSource, node: Node) -> list[Node] | None:
    """The two arguments of `make_float2(a, b)`; else None."""
    if node.type != "call_expression" or src.field(node, "function") not in _MAKERS:
        return None
    arguments = node.child_by_field_name("arguments")
    args = [a for a in arguments.named_children if a.type != "comment"] if arguments is not None else []
    return args if len(args) == 2 else None


def _shared_element(src: KernelSource, node: Node, shared: dict[str, tuple[Node, str, str]]) -> bool:
    array = node.child_by_field_name("argument") if node.type == "subscript_expression" else None
    return array is not None and array.type == "identifier" and src.text(array) in shared


def _per_part(src: KernelSource, statement: Node, names: set[str], part: int) -> str:
    """A whole-pair statement written for one part: the pairs and shared arrays it names renamed to the part's,
    each `make_float2(a, b)` replaced by the part's argument."""
    edits: list[tuple[int, int, str]] = []
    for node in descendants(statement, "call_expression", "identifier"):
        if any(a <= node.start_byte < b for a, b, _ in edits):
            continue
        made = _made(src, node) if node.type == "call_expression" else None
        if made is not None:
            edits.append((node.start_byte, node.end_byte, f"({src.text(made[part])})"))
        elif node.type == "identifier" and src.text(node) in names:
            edits.append((node.start_byte, node.end_byte, f"{src.text(node)}_{_PARTS[part]}"))
    data = src.data
    out, at = [], statement.start_byte
    for start, end, text in sorted(edits):
        out += [data[at:start].decode("utf-8"), text]
        at = end
    out.append(data[at : statement.end_byte].decode("utf-8"))
    return "".join(out)
