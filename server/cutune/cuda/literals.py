"""Tunable literals: the integers in a file that encode hidden tuning choices, and whom they feed."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from tree_sitter import Node

from cutune.cuda.decls import Decl, Declarations, DeclKind
from cutune.cuda.launches import Launch
from cutune.cuda.model import Kernel, LiteralKind, TunableLiteral
from cutune.cuda.syntax import anchored, int_value, node_text, split_arguments
from cutune.cuda.text import LineIndex

_CONSTEXPR = re.compile(rb"\bconstexpr\b")
_SIZEOF = re.compile(rb"\bsizeof\b")
_PRAGMA = re.compile(rb"#[ \t]*pragma[ \t]+unroll\b")

_INT_TYPES = (
    frozenset(
        f"{sign}{base}"
        for sign in ("", "unsigned ", "signed ")
        for base in ("int", "long", "long int", "long long", "long long int", "short", "char")
    )
    | {"unsigned", "uint", "size_t", "auto", "index_t", "ssize_t"}
    | {f"{u}int{bits}_t" for u in ("", "u") for bits in (8, 16, 32, 64)}
)
_UNROLL = re.compile(r"^\s*unroll\s*\(?\s*([0-9][0-9a-fA-FxX']*[uUlL]*)")
_DEFINE_INT = re.compile(r"^\s*\(?\s*([0-9][0-9a-fA-FxX']*[uUlL]*)\s*\)?\s*(?://.*|/\*.*\*/\s*)?$", re.S)
_DIM_CALLS = frozenset(("dim3", "min", "max", "umin", "umax"))

# When one literal matches several rules, the first kind here names it.
_PRIORITY = (
    LiteralKind.LAUNCH_BOUNDS,
    LiteralKind.VECTOR_WIDTH,
    LiteralKind.PRAGMA_UNROLL,
    LiteralKind.DEFINE,
    LiteralKind.CONSTEXPR,
    LiteralKind.TEMPLATE_ARG,
    LiteralKind.LAUNCH_DIM,
)
_RANK = {kind: i for i, kind in enumerate(_PRIORITY)}

# a literal found: start byte, rank of its kind, end byte, kind, name, value, kernel
_Found = tuple[int, int, int, LiteralKind, str | None, int, str | None]


class _Users:
    """Which kernels use a name: occurrences inside a kernel's definition or one of its launches."""

    def __init__(self, data: bytes, declarations: Declarations, launch_at: Callable[[int], Launch | None]) -> None:
        self._data = data
        self._declarations = declarations
        self._launch_at = launch_at
        self._occurrences: dict[str, list[int]] = {}

    def find(self, names: set[str]) -> None:
        """Record every whole-word occurrence of these names in one pass over the text."""
        if not names:
            return
        alternatives = b"|".join(re.escape(n.encode()) for n in sorted(names, key=len, reverse=True))
        for m in re.finditer(rb"\b(?:" + alternatives + rb")\b", self._data):
            self._occurrences.setdefault(m.group().decode(), []).append(m.start())

    def owner(self, name: str, start: int = 0, end: int | None = None) -> str | None:
        """The one kernel that uses `name` within [start, end), or None when none or several do."""
        users: set[str] = set()
        for offset in self._occurrences.get(name, ()):
            if offset < start or (end is not None and offset >= end):
                continue
            kernel = self.kernel_at(offset)
            if kernel is not None:
                users.add(kernel)
        return users.pop() if len(users) == 1 else None

    def kernel_at(self, offset: int) -> str | None:
        """The kernel whose definition, or one of whose launches, contains `offset`."""
        fn = self._declarations.function_at(offset)
        if fn is not None and fn.kind is DeclKind.KERNEL:
            return fn.name
        launch = self._launch_at(offset)
        return launch.kernel if launch is not None else None


def find_literals(
    root: Node,
    data: bytes,
    index: LineIndex,
    kernels: Sequence[Kernel],
    launches: Sequence[Launch],
    launch_at: Callable[[int], Launch | None],
    declarations: Declarations,
    only: str | None = None,
) -> list[TunableLiteral]:
    """Every tunable literal, one per source position, in source order; with `only`, those of that kernel (then
    `kernels` may hold that kernel alone, and `launches` its launches and the others in the functions they are
    in: which kernel a literal feeds still depends on the whole file, through `launch_at`, the launch whose call
    holds an offset, but spans are built for that kernel's literals only)."""
    users = _Users(data, declarations, launch_at)
    found: list[_Found] = []

    def add(kind: LiteralKind, name: str | None, node_or_range: Node | tuple[int, int], kernel: str | None) -> None:
        if isinstance(node_or_range, tuple):
            start, end = node_or_range
        else:
            start, end = node_or_range.start_byte, node_or_range.end_byte
        value = int_value(data[start:end].decode("utf-8", errors="replace"))
        if value is not None:
            found.append((start, _RANK[kind], end, kind, name, value, kernel))

    def kernel_of(offset: int) -> str | None:
        fn = declarations.function_at(offset)
        return fn.name if fn is not None and fn.kind is DeclKind.KERNEL else None

    for k in kernels:
        if k.launch_bounds is not None and only in (None, k.name):
            lb = k.launch_bounds.span
            for r in split_arguments(data, lb.start_byte, lb.end_byte):
                add(LiteralKind.LAUNCH_BOUNDS, None, r, k.name)

    named_vectors: list[tuple[str, Node]] = []
    for vec, n in _vector_widths(root, data):
        name = _declared_name(vec, data)
        if declarations.function_at(vec.start_byte) is None and name is not None:
            named_vectors.append((name, n))
        else:
            add(LiteralKind.VECTOR_WIDTH, name, n, kernel_of(n.start_byte))

    for call in anchored(root, data, _PRAGMA):
        arg = call.child_by_field_name("argument") if call.type == "preproc_call" else None
        match = _UNROLL.match(node_text(data, arg)) if arg is not None else None
        if arg is not None and match:
            start = arg.start_byte + len(node_text(data, arg)[: match.start(1)].encode())
            add(LiteralKind.PRAGMA_UNROLL, None, (start, start + len(match.group(1))), kernel_of(start))

    defines: list[tuple[str, tuple[int, int]]] = []
    for d in declarations.directives:
        value = d.item.child_by_field_name("value") if d.kind is DeclKind.MACRO else None
        if value is not None and d.item.type == "preproc_def":
            match = _DEFINE_INT.match(node_text(data, value))
            if match:
                start = value.start_byte + len(node_text(data, value)[: match.start(1)].encode())
                defines.append((d.name, (start, start + len(match.group(1)))))

    constexprs = [(name, value, declarations.function_at(value.start_byte)) for name, value in _constexprs(root, data)]

    users.find(
        {n for n, _ in defines}
        | {n for n, _, fn in constexprs if fn is None or fn.kind is DeclKind.HOST_FUNCTION}
        | {n for n, _ in named_vectors}
    )
    for name, r in defines:
        add(LiteralKind.DEFINE, name, r, users.owner(name))
    for name, value_node, fn in constexprs:
        add(LiteralKind.CONSTEXPR, name, value_node, _scoped_owner(users, name, fn))
    for name, n in named_vectors:
        add(LiteralKind.VECTOR_WIDTH, name, n, users.owner(name))

    by_name = {k.name: k for k in reversed(kernels)}
    for lc in launches:
        if only not in (None, lc.kernel):
            continue
        kernel = by_name.get(lc.kernel)
        for i, targ in enumerate(lc.template_args):
            if targ.type == "number_literal":
                tparams = kernel.template_params if kernel is not None else ()
                add(
                    LiteralKind.TEMPLATE_ARG,
                    tparams[i].name if i < len(tparams) else None,
                    targ,
                    lc.kernel,
                )
    for (start, end), name, user in _launch_dims(root, data, launches):
        add(LiteralKind.LAUNCH_DIM, name, (start, end), user)

    found.sort(key=lambda f: f[:2])  # by position, then the kind that names a literal matched by several rules
    unique: list[_Found] = []
    for f in found:
        if not unique or unique[-1][0] != f[0]:
            unique.append(f)
    return [
        TunableLiteral(kind, name, value, index.span(start, end), kernel)
        for start, _, end, kind, name, value, kernel in unique
        if only in (None, kernel)
    ]


def _scoped_owner(users: _Users, name: str, fn: Decl | None) -> str | None:
    """A constexpr's kernel: the kernel it sits in, or the one kernel that uses it within its scope."""
    if fn is None:
        return users.owner(name)
    if fn.kind is DeclKind.KERNEL:
        return fn.name
    if fn.kind is DeclKind.HOST_FUNCTION:
        return users.owner(name, fn.start, fn.end)
    return None


def _declared_name(expr: Node, data: bytes) -> str | None:
    """The variable an expression initializes (`constexpr int kVec = 16 / sizeof(T);` → kVec)."""
    node = expr.parent
    while node is not None and node.type == "parenthesized_expression":
        node = node.parent
    if node is not None and node.type == "init_declarator":
        target = node.child_by_field_name("declarator")
        if target is not None and target.type == "identifier":
            return node_text(data, target)
    return None


def _launch_dims(
    root: Node, data: bytes, launches: Sequence[Launch]
) -> list[tuple[tuple[int, int], str | None, str | None]]:
    """Literal grid/block sizes, in `<<<...>>>` itself or in the initializer of the variable used there: each
    literal's byte range, variable name and kernel (None when it feeds several)."""
    kernels_of: dict[tuple[int, int], set[str]] = {}
    names: dict[tuple[int, int], str | None] = {}
    for lc in launches:
        for expr in lc.config[:2]:
            name: str | None = None
            source: Node | None = expr
            if expr.type == "identifier" and lc.function is not None:
                name = node_text(data, expr)
                source = _initializer(root, data, name, lc.function.start, lc.call.start_byte)
            for lit in _dim_literals(source, data) if source is not None else ():
                key = (lit.start_byte, lit.end_byte)
                kernels_of.setdefault(key, set()).add(lc.kernel)
                names[key] = name
    out: list[tuple[tuple[int, int], str | None, str | None]] = []
    for (start, end), kernels in kernels_of.items():
        value = int_value(data[start:end].decode("utf-8", errors="replace"))
        if value is not None and value > 1:  # 0/1 dimensions are structure, not a choice
            out.append(((start, end), names[(start, end)], next(iter(kernels)) if len(kernels) == 1 else None))
    return out


def _initializer(root: Node, data: bytes, name: str, start: int, end: int) -> Node | None:
    """The initializer of the last declaration `name = ...` / `name(...)` in data[start:end]."""
    found: Node | None = None
    pattern = re.compile(rb"\b" + re.escape(name.encode()) + rb"\b")
    for ident in anchored(root, data, pattern, start, end):
        decl = ident.parent
        if decl is not None and decl.type == "init_declarator" and decl.child_by_field_name("declarator") == ident:
            found = decl.child_by_field_name("value")
    return found


def _vector_widths(root: Node, data: bytes) -> list[tuple[Node, Node]]:
    """`16 / sizeof(T)`: the division and its literal."""
    found: list[tuple[Node, Node]] = []
    for token in anchored(root, data, _SIZEOF):
        size = token.parent
        div = size.parent if size is not None and size.type == "sizeof_expression" else None
        if div is None or div.type != "binary_expression" or div.child_by_field_name("right") != size:
            continue
        left, op = div.child_by_field_name("left"), div.child_by_field_name("operator")
        if left is not None and op is not None and op.type == "/" and left.type == "number_literal":
            found.append((div, left))
    return found


def _constexprs(root: Node, data: bytes) -> list[tuple[str, Node]]:
    """`constexpr <integer type> NAME = <int>;` (also `NAME{<int>}`): each name and its literal."""
    found: list[tuple[str, Node]] = []
    for token in anchored(root, data, _CONSTEXPR):
        qualifier = token.parent
        decl = qualifier.parent if qualifier is not None and qualifier.type == "type_qualifier" else None
        type_node = decl.child_by_field_name("type") if decl is not None and decl.type == "declaration" else None
        if decl is None or type_node is None or " ".join(node_text(data, type_node).split()) not in _INT_TYPES:
            continue
        for init in decl.children_by_field_name("declarator"):
            target, value = init.child_by_field_name("declarator"), init.child_by_field_name("value")
            if init.type != "init_declarator" or target is None or value is None or target.type != "identifier":
                continue
            if value.type == "initializer_list" and value.named_child_count == 1:
                value = value.named_children[0]
            if value.type == "number_literal":
                found.append((node_text(data, target), value))
    return found


def _dim_literals(node: Node, data: bytes) -> list[Node]:
    """Number literals that are a dimension outright: whole arguments of dim3(...), or of min/max."""
    t = node.type
    if t == "number_literal":
        return [node]
    if t in ("argument_list", "initializer_list", "parenthesized_expression"):
        return [lit for c in node.named_children for lit in _dim_literals(c, data)]
    if t == "compound_literal_expression":
        value = node.child_by_field_name("value")
        return _dim_literals(value, data) if value is not None else []
    if t == "call_expression":
        fn = node.child_by_field_name("function")
        args = node.child_by_field_name("arguments")
        fname = node_text(data, fn).split("<")[0].split("::")[-1].strip() if fn is not None else ""
        if fname in _DIM_CALLS and args is not None:
            return _dim_literals(args, data)
    return []
