"""Addresses of a stride loop's memory accesses, read as sums over the loop index `i` through the body's
plain locals (declared once, never written, computed without calls or loads; or declared without a value and
assigned once, `x = e;`, where that always runs before any read: C-style code, or a helper's branch on a template
parameter once its arm is resolved).

An address `root + Σ invariant + Σ rows + unit` is contiguous in `i` when its one `i`-dependent unit term
is `i` itself (a flat index), or `i % n` with every other `i`-dependent term linear in `i / n` (a
flattened 2-D index: row `q = i / n`, column `r = i % n`, e.g. `a[q * stride + r]`). Elements
`i = p·V + j` (j < V) then sit at consecutive addresses from `address(p·V)`: always for a flat index, and
for a 2-D one when `n % V == 0` (a pack never crosses a row), which the caller checks at run time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.syntax import declarator_name
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.loops import StrideLoop, squeezed, written_names

_IMPURE = ("call_expression", "subscript_expression", "assignment_expression", "update_expression", "field_expression")
_CAST_CALLS = ("static_cast",)


@dataclass(frozen=True)
class Address:
    """A contiguous access's address: its root pointer and how it depends on the loop index."""

    root: str  # the pointer the address is an offset from
    key: str  # the whole address, locals resolved (two accesses with one key read the same elements)
    invariant: tuple[tuple[int, str], ...]  # (sign, key) of each term that does not depend on i
    rows: tuple[str, ...]  # keys of the terms linear in i / n
    modulus: str | None  # n when the unit term is i % n; None for a flat index
    modulus_text: str  # n as C code ("" for a flat index)
    pointer: tuple[Node, ...]  # the access's nodes: (array, index) of a subscript, or (pointer,) of a load

    def overlaps_nothing_of(self, other: Address) -> bool:
        """Whether the two are the halves `a[f(q) + r]` and `a[f(q) + r ± n]` of one 2-D row (never the same
        element, and a pack of one never reaches the other's, as n ≥ V)."""
        if self.modulus is None or (self.modulus, self.rows) != (other.modulus, other.rows):
            return False
        mine, theirs = Counter(self.invariant), Counter(other.invariant)
        diff = (theirs - mine) + Counter({(-s, k): c for (s, k), c in (mine - theirs).items()})
        return list(diff.elements()) in ([(1, self.modulus)], [(-1, self.modulus)])


def _assigned_once(src: KernelSource, body: Node) -> dict[str, tuple[Node, str | None]]:
    """The locals `body` declares once, without a value, and assigns once by `name = e;` in a statement that always
    runs (nothing but braces between it and `body`), after the declaration and before any read: name → (e, its
    declared type). Such a local holds e wherever it is read."""
    declared: Counter[str] = Counter()
    bare: dict[str, tuple[Node, Node]] = {}  # name → (its declarator, its declaration)
    for d in descendants(body, "declaration"):
        for declarator in d.children_by_field_name("declarator"):
            inner = declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else declarator
            target = declarator_name(inner) if inner is not None else None
            if target is not None:
                declared[src.text(target)] += 1
            if declarator.type == "identifier":
                bare[src.text(declarator)] = (declarator, d)
    writes: dict[str, list[Node]] = {}
    for n in descendants(body, "assignment_expression", "update_expression"):
        target = n.child_by_field_name("left" if n.type == "assignment_expression" else "argument")
        if target is not None and target.type == "identifier":
            writes.setdefault(src.text(target), []).append(n)
    found: dict[str, tuple[Node, str | None]] = {}
    for name, (declarator, declaration) in bare.items():
        assignments = writes.get(name, [])
        if declared[name] != 1 or len(assignments) != 1:
            continue
        write = assignments[0]
        statement, value = write.parent, write.child_by_field_name("right")
        if src.field(write, "operator") != "=" or value is None or statement is None:
            continue
        if statement.type != "expression_statement" or write.start_byte < declaration.end_byte:
            continue
        enclosing = statement.parent
        while enclosing is not None and enclosing != body and enclosing.type == "compound_statement":
            enclosing = enclosing.parent
        if enclosing != body:  # under a condition or a loop: it may not run, or run again
            continue
        left = write.child_by_field_name("left")
        reads = [i for i in descendants(body, "identifier") if src.text(i) == name and i not in (declarator, left)]
        if any(r.start_byte < write.end_byte for r in reads):
            continue
        kind = declaration.child_by_field_name("type")
        found[name] = (value, src.text(kind) if kind is not None else None)
    return found


class LoopIndex:
    """The loop body's plain locals, through which an access's address is read."""

    def __init__(self, src: KernelSource, loop: StrideLoop) -> None:
        self.src, self.var = src, loop.var
        counts: Counter[str] = Counter()
        found: dict[str, tuple[Node, str | None]] = {}
        for d in descendants(loop.body, "init_declarator"):
            name, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
            if name is None or value is None:
                continue
            target = declarator_name(name)
            if target is None:
                continue
            counts[src.text(target)] += 1
            declaration = d.parent
            type_node = declaration.child_by_field_name("type") if declaration is not None else None
            cast = src.text(type_node) if name.type == "identifier" and type_node is not None else None
            found[src.text(target)] = (value, None if cast == "auto" else cast)
        once = _assigned_once(src, loop.body)
        for local, assigned in once.items():
            counts[local] += 1
            found[local] = assigned
        written = written_names(src, loop.body) - set(once)
        self.values = {
            n: v for n, v in found.items() if counts[n] == 1 and n not in written and n != loop.var and _pure(src, v[0])
        }
        self.opaque = (set(counts) | written) - set(self.values)
        self.pointers = {p.name for p in src.kernel.params if "*" in p.type or "[" in p.type}
        for d in src.in_body("declaration"):
            if loop.node.start_byte <= d.start_byte < loop.node.end_byte:
                continue
            for declarator in d.children_by_field_name("declarator"):
                inner = (
                    declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else declarator
                )
                name = declarator_name(inner)
                if inner is not None and inner.type in ("pointer_declarator", "array_declarator") and name is not None:
                    self.pointers.add(src.text(name))
        self.pointers -= written

    def depends(self, node: Node) -> bool:
        """Whether the node's value depends on the loop index (or on what the body computes)."""
        return bool(self._uses(node))

    def address(self, parts: tuple[Node, ...]) -> Address | str:
        """The address of an access (a subscript's array and index, or a loaded pointer), or why it is not
        contiguous in the loop index."""
        terms = [t for part in parts for t in self._terms(part, 1)]
        sign, first = terms[0]
        if first.type != "identifier" or self.src.text(first) not in self.pointers or sign < 0:
            return f"its address `{self.src.text(parts[0])}` does not start from a pointer the loop leaves unchanged"
        invariant: list[tuple[int, str]] = []
        rows: list[str] = []
        units: list[str | None] = []
        divisors: set[str] = set()
        modulus_text = ""
        for sign, term in terms[1:]:
            uses = self._uses(term)
            opaque = [u for kind, u in uses if kind == "opaque"]
            if opaque:
                return f"its address reads {opaque[0]}, which the loop body computes"
            if not uses:
                invariant.append((sign, self.key(term)))
            elif uses == [("bare", "")] and self._is_var(term) and sign > 0:
                units.append(None)
            elif len(uses) == 1 and uses[0][0] == "mod" and self._split(term, "%") is not None and sign > 0:
                units.append(uses[0][1])
                modulus_text = self.expand(self._split(term, "%")[1], self.var)  # type: ignore[index]
            elif all(kind == "div" for kind, _ in uses) and self._linear(term):
                rows.append(self.key(term))
                divisors |= {n for _, n in uses}
            else:
                return f"its offset `{self.src.text(term)}` is not contiguous in {self.var}"
        if len(units) != 1:
            return f"its offset does not step by one element per {self.var}"
        modulus = units[0]
        if divisors and divisors != {modulus}:
            return f"its offset mixes {self.var} / n with a column other than {self.var} % n"
        key = squeezed("+".join(self.key(p) for p in parts))
        return Address(self.src.text(first), key, tuple(invariant), tuple(sorted(rows)), modulus, modulus_text, parts)

    def at(self, address: Address, index: str) -> str:
        """The C pointer of `address` at loop index `index` (the locals written out)."""
        parts = [self.expand(p, index) for p in address.pointer]
        return f"&({parts[0]})[{parts[1]}]" if len(parts) == 2 else f"({parts[0]})"

    def key(self, node: Node) -> str:
        """The node's text with the plain locals written out, squeezed (for comparing terms)."""
        return squeezed(self.expand(node, self.var, casts=False))

    def expand(self, node: Node, index: str, *, casts: bool = True) -> str:
        """The node's text with the loop index as `index` and each plain local as its value (cast to its
        declared type, so the arithmetic is the body's)."""
        src = self.src
        pieces: list[str] = []
        pos = node.start_byte
        for n in descendants(node, "identifier"):
            text = src.text(n)
            if text == self.var:
                new = f"({index})"
            elif text in self.values:
                value, cast = self.values[text]
                inner = self.expand(value, index, casts=casts)
                new = f"static_cast<{cast}>({inner})" if casts and cast else f"({inner})"
            else:
                continue
            pieces += [src.data[pos : n.start_byte].decode(), new]
            pos = n.end_byte
        pieces.append(src.data[pos : node.end_byte].decode())
        return "".join(pieces)

    def _resolved(self, node: Node) -> Node:
        """The node without parentheses or integer casts, a plain local followed to its value."""
        while True:
            if node.type == "parenthesized_expression" and node.named_child_count == 1:
                node = node.named_children[0]
            elif (
                node.type == "cast_expression"
                and node.child_by_field_name("value") is not None
                and "*" not in self.src.field(node, "type")  # a pointer cast changes the element type
            ):
                node = node.child_by_field_name("value")  # type: ignore[assignment]
            elif node.type == "call_expression" and _cast_call(self.src, node) and "*" not in self.src.text(node):
                node = node.child_by_field_name("arguments").named_children[0]  # type: ignore[union-attr]
            elif node.type == "identifier" and self.src.text(node) in self.values:
                node = self.values[self.src.text(node)][0]
            else:
                return node

    def _terms(self, node: Node, sign: int) -> list[tuple[int, Node]]:
        node = self._resolved(node)
        op = self.src.field(node, "operator") if node.type == "binary_expression" else ""
        if op in ("+", "-"):
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            assert left is not None and right is not None
            return self._terms(left, sign) + self._terms(right, sign if op == "+" else -sign)
        return [(sign, node)]

    def _uses(self, node: Node) -> list[tuple[str, str]]:
        """How the node reads the loop index: bare, as `i / n` or `i % n` (with n's key), or through a local
        the body computes (opaque)."""
        node = self._resolved(node)
        if node.type == "identifier":
            text = self.src.text(node)
            return [("bare", "")] if text == self.var else [("opaque", text)] if text in self.opaque else []
        for op, kind in (("/", "div"), ("%", "mod")):
            split = self._split(node, op)
            if split is not None:
                return [(kind, self.key(split[1]))]
        return [u for child in node.named_children for u in self._uses(child)]

    def _split(self, node: Node, op: str) -> tuple[Node, Node] | None:
        """(i, n) when the node is `i op n` with n invariant."""
        node = self._resolved(node)
        if node.type != "binary_expression" or self.src.field(node, "operator") != op:
            return None
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is None or right is None or not self._is_var(left) or self._uses(right):
            return None
        return left, right

    def _is_var(self, node: Node) -> bool:
        node = self._resolved(node)
        return node.type == "identifier" and self.src.text(node) == self.var

    def _linear(self, node: Node) -> bool:
        """Whether the term is a product of one `i / n` and invariant factors."""
        factors = self._factors(node)
        return (
            sum(self._split(f, "/") is not None for f in factors) == 1
            and sum(bool(self._uses(f)) for f in factors) == 1
        )

    def _factors(self, node: Node) -> list[Node]:
        node = self._resolved(node)
        if node.type == "binary_expression" and self.src.field(node, "operator") == "*":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is not None and right is not None:
                return self._factors(left) + self._factors(right)
        return [node]


def _cast_call(src: KernelSource, call: Node) -> bool:
    function = call.child_by_field_name("function")
    args = call.child_by_field_name("arguments")
    return (
        function is not None
        and function.type == "template_function"
        and src.field(function, "name") in _CAST_CALLS
        and args is not None
        and args.named_child_count == 1
    )


def _pure(src: KernelSource, value: Node) -> bool:
    """Whether a local's value is plain arithmetic: no call but casts, no load, no assignment."""
    for node in descendants(value, *_IMPURE):
        if node.type != "call_expression" or not _cast_call(src, node):
            return False
    return not any(src.text(n).startswith("*") for n in descendants(value, "pointer_expression"))
