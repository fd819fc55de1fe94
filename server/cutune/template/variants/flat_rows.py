"""flat_rows: a grid-stride loop over a flat index that its body splits by division (`i / (ne00 * ne01)`,
`i % hidden`), walked row by row: FLAT_ROW_THREADS threads (never more than D) take each row of D consecutive
indices (D the divisor every other divisor is a multiple of), FLAT_ITEMS columns each at once, and the quotients,
remainders and everything computed from them alone are computed once per row instead of once per element. Where
rows are few, FLAT_SPLIT groups of threads share each row (each its part of the columns, the row's values its own).

Packs (FLAT_VEC > 1): an access `a[x]` whose array is row-invariant and whose index is its value at the row's first
index plus the column (read where every element reads it, or written by a statement every element runs) moves by one
element a column. A thread then takes FLAT_VEC consecutive columns at once, loading each such array's FLAT_VEC
elements as one aligned pack before the columns run and storing a written one after them, where the row's part starts
aligned for every pack (checked at run time; the columns one by one where not, and in a part's last, partial chunk).
An array written through a pack must have no other access in the body, as in vectorize; and no pack is taken where an
element may skip the rest (`continue`), or where its index divides by something the row does not check.

Why: a 64-bit integer division is a software routine of some seventy instructions. A body that splits its index
into four coordinates spends more on that arithmetic than on its memory, and runs far below the bandwidth floor.

What makes it exact. Write an element's index as `i = b + c`, with `b = row * D` and `0 <= c < D`. A value of the
form `x(i) = x(b) + c` (the index plus or minus row-invariant integers) is computed as its value at `b` plus the
column. Where `x(b)` is moreover a multiple of D (the index, minus or plus multiples of D), it may be divided:
`x(i) / (D * k) == x(b) / (D * k)` and `x(i) % (D * k) == x(b) % (D * k) + c` whenever `x(b) >= 0` and `D * k > 0`
(the multiples of `D * k` are multiples of D, so none lies inside the row). The rewrite reads the body's
declarations with these rules (products of the same factors are multiples; integer arithmetic of signed types only,
never narrowed; loads only through `const` `__restrict__` pointers, which the kernel cannot write), evaluates the
row-invariant ones once at the row's first index, and declares the others as `value at b + c`. Only the
declarations before any `continue` are read: every element evaluates those, so a row evaluating them once at its
first index evaluates nothing the original would not. At run time each row checks the rules' conditions (the
numerators at `b` not negative, the divisors positive) and runs the original body per element where they fail, as
it does everywhere when D is not positive. Every index below the bound is visited once, as in the original loop, by
whichever thread: the loop's iterations must not care which thread runs them (`loop_blockers`), nor carry a value
from one to the next.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from tree_sitter import Node

from cutune.cuda.model import SourceModel, TemplateParamKind
from cutune.cuda.syntax import declarator_name, int_value, node_text, parse_tree
from cutune.errors import TransformRefused
from cutune.spec import KernelSpec
from cutune.template.edits import EditList
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.recipes.index_bits import HELPER as INDEX_TYPE
from cutune.template.variants.loops import (
    ARITHMETIC,
    SIGNED_WIDTH,
    StrideLoop,
    declared_names,
    edited_body,
    grid_loops_x,
    indented,
    kernel_source,
    line_indent,
    loop_blockers,
    rewritten,
    squeezed,
    statements_of,
    written_names,
)
from cutune.template.variants.model import Launch, Provenance, Transform, Variant
from cutune.template.variants.vectorize import HELPERS as PACK_HELPERS
from cutune.template.variants.vectorize import always_runs, unconditional, use_of

NAME = "flat_rows"
ROW_THREADS = "FLAT_ROW_THREADS"
BLOCKS_PER_SM = "FLAT_BLOCKS_PER_SM"
ITEMS = "FLAT_ITEMS"
SPLIT = "FLAT_SPLIT"
FLAT_VEC = "FLAT_VEC"


@dataclass(frozen=True)
class Value:
    """How an expression varies along a row: `int` (a row-invariant integer of a signed type), `inv` (any other
    row-invariant value), `pos` (its value at the row's first index plus the column), `var` (anything else)."""

    kind: str
    width: int = 0  # int and pos: the bits of its signed type
    factors: tuple[str, ...] = ()  # int: the factors of the product it is, as squeezed texts
    loadable: bool = False  # inv: a pointer into memory the kernel only reads (`const T* __restrict__`)
    aligned: bool = False  # pos: its value at the row's first index is a multiple of D (it may be divided)


_VAR = Value("var")
_INV = Value("inv")


@dataclass(frozen=True)
class _Decl:
    """A value of the loop body the rows evaluate once: a declaration (its statement and name) or a sub-expression
    holding a division (no statement; named here), its value and how it varies."""

    statement: Node | None
    name: str
    value: Node
    kind: str  # int or inv (row-invariant) or pos


@dataclass
class _ColumnPack:
    """The accesses `a[x]` of the body whose address moves with the column (`a` row-invariant, `x` its value at the
    row's first index plus the column), FLAT_VEC columns of them loaded or stored as one pack."""

    name: str
    start: str  # `&a[x]` at the row's first index, in the row's names: the pack of columns c.. is at start + c
    nodes: list[Node]
    read: bool = False
    written: bool = False


class _Reader:
    """The body's declarations read against one row length D (its factors)."""

    def __init__(
        self, src: KernelSource, env: dict[str, Value], row: tuple[str, ...], changed: frozenset[str] = frozenset()
    ) -> None:
        self.src, self.env, self.row = src, dict(env), Counter(row)
        self.changed = changed  # names the body may change after declaring them: their values are per element
        self.conditions: list[tuple[Node, Node]] = []  # (numerator, divisor) of each division read as per-row

    def multiple(self, v: Value) -> bool:
        """Whether `v` is an integer product holding every factor of D."""
        return v.kind == "int" and not (self.row - Counter(v.factors))

    def read(self, node: Node) -> Value:
        """How `node` varies along a row (the conditions of the divisions it takes out of the row collected)."""
        src, t = self.src, node.type
        if t == "parenthesized_expression" and node.named_child_count == 1:
            return self.read(node.named_children[0])
        if t == "number_literal":
            return _literal(src.text(node))
        if t == "identifier":
            return self.env.get(src.text(node), _VAR)
        if t == "cast_expression":
            type_node, inner = node.child_by_field_name("type"), node.child_by_field_name("value")
            return _cast(src.text(type_node), self.read(inner)) if type_node and inner else _VAR
        if t == "call_expression":
            return self._call(node)
        if t == "binary_expression":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            return self._binary(node, left, right) if left is not None and right is not None else _VAR
        if t == "unary_expression":
            inner = node.child_by_field_name("argument")
            v = self.read(inner) if inner is not None else _VAR
            return _whole(v, src.text(node)) if v.kind == "int" else _INV if v.kind == "inv" else _VAR
        if t == "conditional_expression":  # `N_CT > 0 ? N_CT : n`, a size compiled in or not
            parts = [self.read(c) for c in node.named_children]
            if all(v.kind == "int" for v in parts):
                return _whole(Value("int", max(v.width for v in parts[1:])), src.text(node))
            if len(parts) == 3 and parts[0].kind == "int" and parts[1].kind == parts[2].kind == "pos":
                return _pos(max(parts[1].width, parts[2].width), parts[1].aligned and parts[2].aligned)
            return _INV if all(v.kind in ("int", "inv") and not v.loadable for v in parts) else _VAR
        if t == "pointer_expression" and src.field(node, "operator") == "*":
            inner = node.child_by_field_name("argument")
            return _INV if inner is not None and self.read(inner).loadable else _VAR  # a load from read-only memory
        if t == "subscript_expression":
            base, indices = node.child_by_field_name("argument"), node.child_by_field_name("indices")
            index = indices.named_children[0] if indices is not None and indices.named_child_count == 1 else None
            if base is None or index is None or not self.read(base).loadable:
                return _VAR
            return _INV if self.read(index).kind == "int" else _VAR  # a load from read-only memory
        return _VAR

    def _call(self, node: Node) -> Value:
        src = self.src
        function, args = node.child_by_field_name("function"), node.child_by_field_name("arguments")
        if function is None or args is None:
            return _VAR
        values = [self.read(a) for a in args.named_children]
        if function.type in ("primitive_type", "sized_type_specifier") and len(values) == 1:
            return _cast(src.text(function), values[0])  # int64_t(x)
        if function.type == "template_function":
            fname, targs = function.child_by_field_name("name"), function.child_by_field_name("arguments")
            if fname is None or targs is None or len(values) != 1:
                return _VAR
            if src.text(fname) == "static_cast":
                return _cast(src.text(targs)[1:-1], values[0])
            return _cast(src.text(function), values[0]) if src.text(fname) == INDEX_TYPE else _VAR
        if not ARITHMETIC.fullmatch(src.text(function)) or not values:
            return _VAR
        if all(v.kind == "int" for v in values):
            return _whole(Value("int", max(v.width for v in values)), src.text(node))
        return _INV if all(v.kind in ("int", "inv") for v in values) else _VAR

    def _binary(self, node: Node, left_node: Node, right_node: Node) -> Value:
        op = self.src.field(node, "operator")
        left, right = self.read(left_node), self.read(right_node)
        width = max(left.width, right.width)
        if op in ("/", "%") and left.aligned and self.multiple(right):
            self.conditions.append((left_node, right_node))
            return _whole(Value("int", width), self.src.text(node)) if op == "/" else _pos(width, True)
        if op in ("+", "-") and left.kind == "pos" and right.kind == "int":  # shifted: divisible while by multiples
            return _pos(width, left.aligned and self.multiple(right))
        if op == "+" and right.kind == "pos" and left.kind == "int":
            return _pos(width, right.aligned and self.multiple(left))
        if op in ("+", "-") and left.loadable and right.kind == "int":
            return left  # a read-only pointer moved
        if op == "+" and right.loadable and left.kind == "int":
            return right
        if left.kind == right.kind == "int":
            factors = left.factors + right.factors if op == "*" else (squeezed(self.src.text(node)),)
            return Value("int", width, factors)
        return _INV if left.kind in ("int", "inv") and right.kind in ("int", "inv") else _VAR

    def declare(self, decl: Node) -> _Decl | None:
        """Reads one declaration into the names' values: the declaration, when a row evaluates it once."""
        src = self.src
        declarators = decl.children_by_field_name("declarator")
        only = declarators[0] if len(declarators) == 1 and declarators[0].type == "init_declarator" else None
        target = only.child_by_field_name("declarator") if only is not None else None
        value = only.child_by_field_name("value") if only is not None else None
        name = declarator_name(target)
        if only is None or target is None or value is None or name is None or value.type == "initializer_list":
            for d in declarators:  # declared without a value, or several at once: per element
                named = declarator_name(d)
                if named is not None:
                    self.env[src.text(named)] = _VAR
            return None
        conditions = len(self.conditions)
        type_text = src.data[decl.start_byte : target.start_byte].decode("utf-8")
        declared = _declared(type_text, target.type, self.read(value)) if src.text(name) not in self.changed else _VAR
        self.env[src.text(name)] = replace(declared, factors=(src.text(name),)) if declared.kind == "int" else declared
        if declared.kind == "var":
            del self.conditions[conditions:]  # its divisions stay with the element
            return None
        return _Decl(decl, src.text(name), value, declared.kind)

    def hoisted(self, statement: Node, named: str) -> list[_Decl]:
        """The divisions `statement` always evaluates (not in a branch of `?:`, `&&` or `||`) that a row can take
        out of its elements, each with the largest sub-expression around it that varies as a row's values do (for a
        statement the row cannot evaluate as a whole); `named`: the prefix of their names. Where the element may
        use the object itself (`&a[i / d]`, a reference bound to it, an argument of a function that may take it by
        reference), only an integer is taken out: a load would leave a copy in its place."""
        found: list[_Decl] = []

        def visit(node: Node, lvalue: bool) -> None:
            if node.type in _UNEVALUATED or not _divides(self.src, node):
                return
            if node.type in _HOISTABLE:
                before = len(self.conditions)
                v = self.read(node)
                if v.kind in (("int", "pos") if lvalue else ("int", "pos", "inv")) and len(self.conditions) > before:
                    found.append(_Decl(None, f"{named}{len(found)}", node, v.kind))
                    return
                del self.conditions[before:]  # its divisions stay with the element
            for child, as_object in _operands(self.src, node, lvalue):
                visit(child, as_object)

        visit(statement, False)
        return found


# expressions a row may evaluate in an element's stead; expressions whose operands are not evaluated
_HOISTABLE = frozenset(
    {
        "binary_expression", "parenthesized_expression", "cast_expression", "call_expression", "unary_expression",
        "conditional_expression", "subscript_expression", "pointer_expression",
    }
)  # fmt: skip
_UNEVALUATED = frozenset({"lambda_expression", "sizeof_expression", "alignof_expression", "decltype"})


def _divides(src: KernelSource, node: Node) -> bool:
    """Whether `node` holds a `/` or `%`."""
    return any(src.field(n, "operator") in ("/", "%") for n in descendants(node, "binary_expression"))


def _operands(src: KernelSource, node: Node, lvalue: bool) -> list[tuple[Node, bool]]:
    """The children of `node` evaluated whenever it is (a `?:`'s condition only, the left side of `&&` and `||`),
    each with whether the element may use the object it names rather than its value (`lvalue`: `node`'s own)."""
    if node.type == "conditional_expression":
        condition = node.child_by_field_name("condition")
        return [(condition, False)] if condition is not None else []
    if node.type == "binary_expression" and src.field(node, "operator") in ("&&", "||"):
        left = node.child_by_field_name("left")
        return [(left, False)] if left is not None else []
    if node.type == "parenthesized_expression":
        return [(c, lvalue) for c in node.named_children]
    if node.type == "pointer_expression" and src.field(node, "operator") == "&":
        return [(c, True) for c in node.named_children]
    if node.type == "call_expression":  # a function not known to take its arguments by value may take a reference
        function, args = node.child_by_field_name("function"), node.child_by_field_name("arguments")
        by_value = function is not None and ARITHMETIC.fullmatch(src.text(function)) is not None
        return [(c, False) for c in ([function] if function is not None else [])] + [
            (a, not by_value) for a in (args.named_children if args is not None else [])
        ]
    if node.type == "init_declarator":  # a reference bound to the value
        target, value = node.child_by_field_name("declarator"), node.child_by_field_name("value")
        reference = target is not None and target.type == "reference_declarator"
        return [(c, c == value and reference) for c in node.named_children]
    return [(c, False) for c in node.named_children]


def changed_names(src: KernelSource, node: Node) -> set[str]:
    """The names under `node` that may change after their declaration: assigned, incremented, their address taken,
    bound to a reference, or passed by name to a function (which may take it by reference)."""
    names = written_names(src, node)
    for n in descendants(node, "pointer_expression"):
        argument = n.child_by_field_name("argument")
        if src.field(n, "operator") == "&" and argument is not None and argument.type == "identifier":
            names.add(src.text(argument))
    for n in descendants(node, "init_declarator"):
        target, value = n.child_by_field_name("declarator"), n.child_by_field_name("value")
        if target is not None and target.type == "reference_declarator" and value is not None:
            names.add(src.text(value).strip())
    for call in descendants(node, "call_expression"):
        function, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
        if function is None or args is None or ARITHMETIC.fullmatch(src.text(function)):
            continue
        if function.type in ("primitive_type", "sized_type_specifier"):
            continue  # a cast: `int64_t(x)`
        name = function.child_by_field_name("name") if function.type == "template_function" else function
        if name is not None and src.text(name) in ("static_cast", INDEX_TYPE):
            continue
        by_value = _by_value(src, src.text(name) if name is not None else "")
        for k, a in enumerate(args.named_children):
            if a.type == "identifier" and (k >= len(by_value) or not by_value[k]):
                names.add(src.text(a))
    return names


def _by_value(src: KernelSource, function: str) -> list[bool]:
    """Per parameter of the file's definitions of `function`, whether every one takes it by value (or by const
    reference); [] where the file defines no such function (a macro, a library's): nothing known."""
    found = _definitions(src.data).get(function)
    if not found:
        return []
    return [all(f[k] if k < len(f) else False for f in found) for k in range(min(len(f) for f in found))]


@functools.lru_cache(maxsize=4)
def _definitions(data: bytes) -> dict[str, list[list[bool]]]:
    """The functions a file defines at namespace scope, by name: per definition, per parameter, whether it is taken
    by value (or by const reference). Read once per text: every kernel of a file asks."""
    found: dict[str, list[list[bool]]] = {}
    pending = list(parse_tree(data).root_node.children)
    while pending:
        node = pending.pop()
        if node.type in ("namespace_definition", "linkage_specification", "template_declaration", "declaration_list"):
            pending.extend(node.children)
            continue
        if node.type != "function_definition":
            continue
        declarator = node.child_by_field_name("declarator")
        while declarator is not None and declarator.type != "function_declarator":
            declarator = declarator.child_by_field_name("declarator")
        params = declarator.child_by_field_name("parameters") if declarator is not None else None
        if declarator is None or params is None:
            continue
        name = node_text(data, declarator.child_by_field_name("declarator") or declarator).split("::")[-1].strip()
        found.setdefault(name, []).append(
            [
                not descendants(p, "reference_declarator") or "const" in node_text(data, p).split("&")[0].split()
                for p in params.named_children
                if p.type == "parameter_declaration"
            ]
        )
    return found


def _literal(text: str) -> Value:
    """An integer literal's value (an unsigned one is invariant but not a signed integer)."""
    if int_value(text) is None:
        return _INV
    suffix = text.lower()[len(text.lower().rstrip("ul")) :]  # hex digits hold neither u nor l
    if "u" in suffix:
        return _INV
    return Value("int", 64 if "l" in suffix else 32, (text,))


def _type_width(type_text: str) -> int:
    """The bits of a signed integer type (`const int64_t`), 0 for any other type. index_bits' `cutune_index<BITS,
    Wide, Narrow>` counts as its wide type: its constraint keeps every index it narrows below 2^30."""
    words = [w for w in type_text.split() if w not in ("const", "volatile", "__restrict__", "static", "constexpr")]
    text = " ".join(words)
    if text.startswith(f"{INDEX_TYPE}<") and text.endswith(">"):
        return SIGNED_WIDTH.get(text[len(INDEX_TYPE) + 1 : -1].split(",")[1].strip(), 0)
    return SIGNED_WIDTH.get(text, 0)


def _cast(type_text: str, v: Value) -> Value:
    """`v` cast to the type: integers keep what they are in a signed type at least as wide."""
    width = _type_width(type_text)
    if v.kind in ("int", "pos") and width >= v.width and width:
        return replace(v, width=width)
    if v.loadable and "*" in type_text and "const" in type_text.split("*")[0].split():
        return v
    return _INV if v.kind in ("int", "inv") else _VAR


def _pos(width: int, aligned: bool) -> Value:
    """A value that is its value at the row's first index plus the column."""
    return Value("pos", width, aligned=aligned)


def _whole(v: Value, text: str) -> Value:
    """An integer standing for its whole text (no longer a product of factors)."""
    return replace(v, factors=(squeezed(text),))


def _declared(type_text: str, declarator: str, v: Value) -> Value:
    """What a name declared with the type from `v` holds: no integer narrowed, pointers only invariant."""
    if declarator == "pointer_declarator":
        return v if v.kind == "inv" else _VAR
    if declarator != "identifier":
        return _VAR  # references, arrays
    width = _type_width(type_text)
    if v.kind in ("int", "pos") and width:
        return replace(v, width=width, factors=()) if width >= v.width else _VAR
    return _INV if v.kind in ("int", "inv") and not v.loadable else _VAR


def _environment(src: KernelSource, loop: StrideLoop) -> dict[str, Value]:
    """The row-invariant names the loop body may read: the kernel's parameters and template values, and the locals
    declared before the loop in the kernel's outermost block; none ever assigned or declared again elsewhere."""
    env: dict[str, Value] = {}
    for tp in src.kernel.template_params:
        width = _type_width(tp.type) if tp.kind is TemplateParamKind.VALUE else 0
        env[tp.name] = Value("int", width, (tp.name,)) if width else _INV
    for p in src.kernel.params:
        const_restrict = "__restrict__" in p.type and "const" in p.type.split("*")[0].split()
        width = _type_width(p.type)
        pointer = "*" in p.type
        env[p.name] = (
            Value("int", width, (p.name,))
            if width and not pointer
            else replace(_INV, loadable=const_restrict and pointer)
        )
    reader = _Reader(src, env, ())
    top = [s for s in statements_of(src.body) if s.end_byte <= loop.node.start_byte and s.type == "declaration"]
    for decl in top:
        reader.declare(decl)
    elsewhere = declared_names(src, src.body) - declared_names(src, loop.body)
    for decl in top:
        for d in decl.children_by_field_name("declarator"):
            named = declarator_name(d)
            if named is not None:
                elsewhere.discard(src.text(named))
    unstable = changed_names(src, src.body) | elsewhere
    return {n: v for n, v in reader.env.items() if n not in unstable and v.kind != "var"}


class FlatRows(Transform):
    name = "flat_rows"

    def apply(self, model: SourceModel, kernel: str, spec: KernelSpec | None) -> Variant:
        src = kernel_source(self.name, model, kernel)
        grid_loops = grid_loops_x(src)
        if not grid_loops:
            raise TransformRefused(self.name, "no grid-stride loop over a flat index")
        edits = EditList(src.data)
        refusals: list[str] = []
        notes: list[str] = []
        vectorized = False
        for index, loop in enumerate(grid_loops):
            plan = _plan(src, loop)
            if isinstance(plan, str):
                refusals.append(f"the loop at line {src.line(loop.node)} {plan}")
                continue
            reader, decls = plan
            rows, packed = _rows(src, loop, index, reader, decls)
            vectorized = vectorized or packed
            new = indented(rows, line_indent(src.data, loop.node.start_byte))
            edits.replace(loop.node.start_byte, loop.node.end_byte, new.lstrip())
            row = " * ".join(sorted(reader.row.elements()))
            notes.append(f"line {src.line(loop.node)}: rows of {row}, {len(reader.conditions)} division(s) a row")
        if not notes:
            raise TransformRefused(self.name, "; ".join(refusals))
        inner = edited_body(src, edits)
        threads = TunableParam(
            ROW_THREADS, (32, 64, 128, 256, 512, 1024), 128, Binding.TEMPLATE, description="threads per row"
        )
        items = TunableParam(ITEMS, (1, 2, 4, 8), 4, Binding.TEMPLATE, description="columns per thread at once")
        split = TunableParam(SPLIT, (1, 2, 4, 8, 16), 1, Binding.TEMPLATE, description="parts each row is split into")
        blocks = TunableParam(
            BLOCKS_PER_SM, (1, 2, 4, 8, 16, 32), 8, Binding.LAUNCH, description="blocks per SM the rows spread over"
        )
        packs = TunableParam(
            FLAT_VEC, (1, 2, 4, 8), 1, Binding.TEMPLATE, description="columns a thread loads and stores as one pack"
        )
        return Variant(
            name=NAME,
            body=inner,
            params=(threads, items, split, blocks, *((packs,) if vectorized else ())),
            helpers=PACK_HELPERS if vectorized else "",
            launch=Launch(grid=(f"max(1, min({{grid}}, {BLOCKS_PER_SM} * sm_count))",), block=("{block}",)),
            provenance=Provenance(self.name, note="the flat index walked by rows (" + "; ".join(notes) + ")"),
        )


def _plan(src: KernelSource, loop: StrideLoop) -> tuple[_Reader, list[_Decl]] | str:
    """The body read against the row length that takes the most divisions out of its elements; why none does."""
    if not _type_width(loop.var_type):
        return f"has a `{loop.var_type}` index: the row split is proven for signed integer indices"
    blocker = loop_blockers(src, loop)
    if blocker is not None:
        return blocker
    carried = sorted(written_names(src, loop.body) - declared_names(src, loop.body))
    if carried:
        return f"assigns {carried[0]}, declared outside it: a value carried from one iteration to the next"
    env = {**_environment(src, loop), loop.var: _pos(_type_width(loop.var_type), True)}
    statements = []  # what every element evaluates: the declarations and expressions before any `continue`
    for statement in statements_of(loop.body):
        if descendants(statement, "continue_statement"):
            break  # an element may skip what follows: a row must not evaluate it where no element would
        if statement.type in ("declaration", "expression_statement"):
            statements.append(statement)
    changed = frozenset(changed_names(src, loop.body))
    probe = _Reader(src, env, ("\0",), changed)  # no row: every divisor that is an invariant integer is a candidate
    candidates: dict[tuple[str, ...], None] = {}
    for statement in statements:
        for div in descendants(statement, "binary_expression"):
            right = div.child_by_field_name("right")
            if src.field(div, "operator") in ("/", "%") and right is not None:
                v = probe.read(right)
                if v.kind == "int":
                    candidates[tuple(sorted(v.factors))] = None
        if statement.type == "declaration":
            probe.declare(statement)
    best: tuple[_Reader, list[_Decl]] | None = None
    for row in sorted(candidates, key=len):  # of equal counts, the shortest row (the innermost divisor)
        reader = _Reader(src, env, row, changed)
        decls: list[_Decl] = []
        for n, statement in enumerate(statements):
            declared = reader.declare(statement) if statement.type == "declaration" else None
            decls += [declared] if declared is not None else reader.hoisted(statement, f"{n}_")
        if reader.conditions and (best is None or len(reader.conditions) > len(best[0].conditions)):
            best = (reader, decls)
    if best is None:
        return "divides no value of its index by a loop-invariant signed integer"
    return best


def _column_packs(
    src: KernelSource, loop: StrideLoop, reader: _Reader, at_row: Callable[[Node], str], k: int
) -> list[_ColumnPack]:
    """The body's accesses that FLAT_VEC columns may load or store as one pack: `a[x]` with `a` a row-invariant
    name and `x` its row's first value plus the column, read where every element reads it, or written by a statement
    every element runs; none where an element may skip the rest (`continue`), or where an array written through a
    pack is accessed otherwise too (packs could overlap)."""
    if descendants(loop.body, "continue_statement"):
        return []
    packs: dict[tuple[str, str], _ColumnPack] = {}
    other: set[str] = set()  # arrays accessed in a way no pack takes
    for sub in descendants(loop.body, "subscript_expression"):
        array, indices = sub.child_by_field_name("argument"), sub.child_by_field_name("indices")
        index = indices.named_children[0] if indices is not None and indices.named_child_count == 1 else None
        if array is None or array.type != "identifier" or index is None:
            continue
        name = src.text(array)
        node, role = use_of(src, sub)
        # a division read here for the first time would hold along the row only under conditions the row never
        # checks: such an index is not taken (and the reader keeps the conditions it had)
        checked = list(reader.conditions)
        movable = reader.read(array).kind == "inv" and reader.read(index).kind == "pos"
        movable = movable and all(c in checked for c in reader.conditions)
        reader.conditions[:] = checked
        ok = (role == "read" and always_runs(node, loop.body)) or (role == "write" and unconditional(node, loop.body))
        if not (movable and ok):
            other.add(name)
            continue
        key = (name, squeezed(src.text(index)))
        start = f"&({at_row(array)})[{at_row(index)}]"
        pack = packs.setdefault(key, _ColumnPack(f"cutune_pk{k}_{len(packs)}", start, []))
        pack.nodes.append(node)
        pack.read = pack.read or role == "read"
        pack.written = pack.written or role == "write"
    for (name, _), pack in packs.items():
        if pack.written and (name in other or sum(1 for a, _ in packs if a == name) > 1):
            return []
    return list(packs.values())


def _per_element(name: str, x: _Decl, col: str) -> str:
    """What an element evaluates for `x` from its row's value `name`: the row's value, plus the column for `pos`
    (a sub-expression cast back to its own type: the sum is wider where the column is)."""
    if x.kind != "pos":
        return name
    return f"{name} + {col}" if x.statement is not None else f"((decltype({name}))({name} + {col}))"


def _rows(src: KernelSource, loop: StrideLoop, k: int, reader: _Reader, decls: list[_Decl]) -> tuple[str, bool]:
    """The loop over rows of D indices: the declarations evaluated at the row's first index, then each element from
    them where the row's conditions hold (FLAT_VEC columns at once, the accesses that move with the column one pack
    each, where there are such and the row's part is aligned); the original body per element where they do not (and
    everywhere when D is not positive). And whether there are packs."""
    d, part, rt, groups, rows, unit, row, first, last, base, at, col = (
        f"cutune_{n}{k}"
        for n in ("d", "part", "rt", "groups", "rows", "unit", "row", "first", "last", "base", "at", "col")
    )
    # a sub-expression's name is `<statement>_<n>`, which no identifier is
    renamed = {x.name: f"cutune_{'r' if x.statement is not None else 'e'}{k}_{x.name}" for x in decls}
    at_row: dict[str, str] = {loop.var: at}  # the names read at the row's first index, so far

    def substituted(node: Node, names: dict[str, str]) -> str:  # on one line: comments dropped
        def edit(n: Node) -> str | None:
            if n.type == "comment":
                return " "
            return names.get(src.text(n)) if n.type == "identifier" else None

        return " ".join(rewritten(src, node, edit).split())

    row_decls = []
    for x in decls:
        if x.statement is None:  # a sub-expression: `auto` gives it the type the element's expression has
            row_decls.append(f"const auto {renamed[x.name]} = {substituted(x.value, at_row)};")
            continue
        row_decls.append(substituted(x.statement, {**at_row, x.name: renamed[x.name]}))
        at_row[x.name] = renamed[x.name]
    conditions: list[str] = []
    for numerator, divisor in reader.conditions:
        for c in (f"({substituted(numerator, at_row)}) >= 0", f"({substituted(divisor, at_row)}) > 0"):
            if c not in conditions:
                conditions.append(c)
    values = {x.value: _per_element(renamed[x.name], x, col) for x in decls}
    fast = rewritten(src, loop.body, lambda n: values.get(n))
    # the row length is computed before the loop, where the body's own locals are not declared: each one a factor
    # names is written as its (row-invariant) value
    locals_ = {x.name: x.value for x in decls if x.statement is not None and x.kind == "int"}
    names = re.compile(r"\b(" + "|".join(map(re.escape, locals_)) + r")\b") if locals_ else None

    def before_loop(text: str, depth: int = 0) -> str:
        if names is None or depth > len(locals_):
            return text
        return names.sub(lambda m: f"({before_loop(squeezed(src.text(locals_[m.group(1)])), depth + 1)})", text)

    row_length = " * ".join(f"({before_loop(f)})" for f in sorted(reader.row.elements()))
    packs = _column_packs(src, loop, reader, lambda n: substituted(n, at_row), k)

    def columns(body: str) -> str:  # ITEMS columns a thread at once, unrolled: their loads in flight together
        return "\n".join(
            [
                f"for (long long cutune_cols{k} = {first} + (int)threadIdx.x % {rt}; cutune_cols{k} < {last}; "
                f"cutune_cols{k} += (long long){rt} * {ITEMS}) {{",
                "#pragma unroll",
                f"  for (int cutune_u{k} = 0; cutune_u{k} < {ITEMS}; ++cutune_u{k}) {{",
                f"    const long long {col} = cutune_cols{k} + (long long)cutune_u{k} * {rt};",
                f"    if ({col} < {last} && {base} + {col} < ({loop.bound})) {{",
                f"      const {loop.var_type} {loop.var} = {base} + {col};",
                indented(body, "      "),
                "    }",
                "  }",
                "}",
            ]
        )

    def packed() -> str:  # FLAT_VEC columns a chunk, the row's contiguous accesses one pack each where aligned
        j, c0 = f"cutune_j{k}", f"cutune_c{k}"
        element = {n: f"{pack.name}.v[{j}]" for pack in packs for n in pack.nodes}
        body = rewritten(src, loop.body, lambda n: element.get(n) or values.get(n))
        aligned = " && ".join(
            f"reinterpret_cast<unsigned long long>({p.start} + {first}) % (sizeof(*({p.start})) * {FLAT_VEC}) == 0"
            for p in packs
        )
        loads = [  # a pack written in place is loaded first: its elements are read before they are written
            f"{'auto' if p.written else 'const auto'} {p.name} = cutune_vec_load<{FLAT_VEC}>({p.start} + {c0});"
            if p.read
            else f"decltype(cutune_vec_load<{FLAT_VEC}>({p.start})) {p.name};"
            for p in packs
        ]
        stores = [f"cutune_vec_store<{FLAT_VEC}>({p.start} + {c0}, {p.name});" for p in packs if p.written]
        return "\n".join(
            [
                f"if ({FLAT_VEC} > 1 && {aligned}) {{",
                f"  for (long long cutune_chunk{k} = {first} + (long long)((int)threadIdx.x % {rt}) * {FLAT_VEC}; "
                f"cutune_chunk{k} < {last}; cutune_chunk{k} += (long long){rt} * {FLAT_VEC} * {ITEMS}) {{",
                "#pragma unroll",
                f"    for (int cutune_u{k} = 0; cutune_u{k} < {ITEMS}; ++cutune_u{k}) {{",
                f"      const long long {c0} = cutune_chunk{k} + (long long)cutune_u{k} * {rt} * {FLAT_VEC};",
                f"      if ({c0} + {FLAT_VEC} <= {last} && {base} + {c0} + {FLAT_VEC} <= ({loop.bound})) {{",
                *(f"        {t}" for t in loads),
                "#pragma unroll",
                f"        for (int {j} = 0; {j} < {FLAT_VEC}; ++{j}) {{",
                f"          const long long {col} = {c0} + {j};",
                f"          const {loop.var_type} {loop.var} = {base} + {col};",
                indented(body, "          "),
                "        }",
                *(f"        {t}" for t in stores),
                f"      }} else if ({c0} < {last}) {{",  # the part's last chunk, partial: column by column
                f"        for (long long {col} = {c0}; {col} < {last} && {col} < {c0} + {FLAT_VEC}; ++{col}) {{",
                f"          if ({base} + {col} < ({loop.bound})) {{",
                f"            const {loop.var_type} {loop.var} = {base} + {col};",
                indented(fast, "            "),
                "          }",
                "        }",
                "      }",
                "    }",
                "  }",
                "} else {",
                indented(columns(fast), "  "),
                "}",
            ]
        )

    text = "\n".join(
        [
            "{",
            f"  const long long {d} = {row_length};  // a row: the divisor the others are multiples of",
            f"  if ({d} > 0) {{",
            f"    const long long {part} = ({d} + {SPLIT} - 1) / {SPLIT};  // columns of each of a row's SPLIT parts",
            f"    const int {rt} = (int)min(min((long long)({ROW_THREADS}), (long long)blockDim.x), {part});",
            f"    const int {groups} = (int)blockDim.x / {rt};",
            f"    const long long {rows} = ((long long)({loop.bound}) + {d} - 1) / {d};",
            f"    for (long long {unit} = (long long)blockIdx.x * {groups} + (int)threadIdx.x / {rt};",
            f"         (int)threadIdx.x < {groups} * {rt} && {unit} < {rows} * {SPLIT};",
            f"         {unit} += (long long){groups} * gridDim.x) {{",
            f"      const long long {row} = {unit} / {SPLIT};",
            f"      const long long {first} = ({unit} % {SPLIT}) * {part};",
            f"      const long long {last} = min({d}, {first} + {part});",
            f"      const long long {base} = {row} * {d};",
            f"      const {loop.var_type} {at} = {base};",
            *(f"      {t}" for t in row_decls),
            f"      if ({' && '.join(conditions) or 'true'}) {{",
            indented(packed() if packs else columns(fast), "        "),
            "      } else {",
            indented(columns(src.text(loop.body)), "        "),
            "      }",
            "    }",
            "  } else {",
            indented(src.text(loop.node), "    "),
            "  }",
            "}",
        ]
    )
    return text, bool(packs)
