"""index_bits: a kernel's 64-bit integer index arithmetic computed in 32 bits where the problem's sizes allow.

Production kernels compute indices in `int64_t` (or `long long`, `size_t`) so that no tensor overflows them;
each 64-bit division or modulo is a long instruction sequence, and at most sizes every index fits in 32 bits.
The kernel gets a template parameter INDEX_BITS (64, the default, is the original) and, before it, a type helper
`cutune_index<BITS, Wide, Narrow>` (Wide at 64, Narrow at 32; one per namespace of a file). The 64-bit locals
whose every value is index arithmetic (thread and block indices, literals, size arguments, other such locals)
are declared through it; inside their values, and inside those of 32-bit locals that divide 64-bit operands, the
64-bit arguments, the thread indices (which keep their declaration, the form the loop transforms recognise) and
the unsigned operands meeting them are converted through it: at 64 each conversion is to the type the operand
converted to as written, at 32 the divisions and modulos take 32 bits. Values read from memory (a row index
loaded from a tensor), whatever is computed from them, a local passed to a function or by address, and every
pointer offset that mixes in a 64-bit argument (a stride) keep their 64 bits.

32 is only feasible where it is safe for the sizes: the constraint `INDEX_BITS == 64 or index_extent <= 2**30`
holds where the largest array argument's element count (and every integral scalar argument) is at most 2^30,
leaving a factor of two below 2^31 for an index one stride past the last element; a per-size dispatch
guards a branch that launches INDEX_BITS = 32 by the same bound on the host (`apply/dispatch.py`).
The bound is the assumption the rule rests on: index arithmetic stays within the extent of what it indexes.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from cutune.cuda.model import Kernel, SourceModel, TemplateParamKind
from cutune.template.model import Binding, Config, TunableParam
from cutune.template.recipes.base import Draft, KernelRewrite, KernelSource, Recipe, descendants
from cutune.template.recipes.specialize import INTEGRAL, base_type
from cutune.template.tuning import namespaces_at

NAME = "INDEX_BITS"
WIDE, NARROW = 64, 32
# the largest index extent the 32-bit form runs at: half of 2^31, so an index one grid stride (at most the
# extent) past the last element still fits
NARROW_LIMIT = 2**30
EXTENT = "index_extent"  # the constraint's name for the largest array argument's elements (KernelSpec.index_extent)
CONSTRAINT = f"{NAME} == {WIDE} or {EXTENT} <= {NARROW_LIMIT}"
_COMMENT = "bits of the index arithmetic (64 = as written; 32 only where every index fits, the sizes decide)"

# 64-bit integer types, each with its 32-bit counterpart of the same signedness
_NARROWED = {
    **dict.fromkeys(("int64_t", "long long", "long long int", "signed long long", "long", "long int"), "int"),
    **dict.fromkeys(("ssize_t", "ptrdiff_t", "index_t", "signed long", "signed long long int"), "int"),
    **dict.fromkeys(("uint64_t", "unsigned long long", "unsigned long long int", "unsigned long"), "unsigned"),
    **dict.fromkeys(("unsigned long int", "size_t"), "unsigned"),
}
_BUILTINS = frozenset(("threadIdx", "blockIdx", "blockDim", "gridDim"))
_MIN_MAX = frozenset(("min", "max", "umin", "umax", "llmin", "llmax", "ullmin", "ullmax"))
_MACRO = re.compile(r"[A-Z][A-Z0-9_]*")  # a constant macro, e.g. CUDA_SET_ROWS_BLOCK_SIZE
_OPERATORS = frozenset(("/", "%"))  # the long 64-bit sequences (a product is a few instructions)


# the type helper declared before the first narrowed kernel of a namespace (the kernels after it share it); not
# named after the kernel: the canonical forms read a call's name for collectives (`dequantize_block_index<...>(x)`)
HELPER = "cutune_index"


def index_param() -> TunableParam:
    """The INDEX_BITS parameter (64 = the original)."""
    return TunableParam(NAME, (WIDE, NARROW), WIDE, Binding.TEMPLATE, description="index arithmetic in 64 or 32 bits")


def narrowed(config: Config) -> Config:
    """`config` with 32-bit indices."""
    return Config.of({**config, NAME: NARROW})


def widened(config: Config) -> Config | None:
    """`config` with 64-bit indices where it computes them in 32 bits (None where it does not)."""
    return Config.of({**config, NAME: WIDE}) if config.get(NAME) == NARROW else None


class IndexBits(Recipe):
    name = "index_bits"
    description = "64-bit integer index arithmetic (its divisions and modulos) computed in 32 bits where it fits"

    def apply(self, model: SourceModel, kernel: Kernel, draft: Draft) -> Draft:
        src = KernelSource(model, kernel)
        if src.template_param(NAME) and src.member_int(NAME) is not None:
            return draft.extend(index_param(), constraints=(CONSTRAINT,))  # already written
        if src.taken(NAME):
            self.refuse(f"{NAME} is already a template parameter or tuning-struct member of {kernel.name}")
        found = _Narrowing(src)
        if not found.wide:
            self.refuse("no 64-bit integer index arithmetic (no int64_t, long long or size_t locals or arguments)")
        if not found.narrowed_exprs() and not found.kept and not found.indices:
            names = ", ".join(sorted(found.params)[:4]) or "none"
            self.refuse(f"no 64-bit index arithmetic to narrow: the 64-bit arguments ({names}) are used as they are")
        if not found.narrowed_exprs():
            only = [f"{name} is a thread index" for name in found.indices]
            self.refuse("no 64-bit local is index arithmetic alone: " + "; ".join([*found.kept, *only][:3]))
        if not found.gains():
            self.refuse("nothing to gain: the narrowable 64-bit locals take part in no division or modulo")
        return draft.extend(index_param(), constraints=(CONSTRAINT,), text=self._rewrite(src, found))

    def _rewrite(self, src: KernelSource, found: _Narrowing) -> str:
        rewrite = KernelRewrite(src, self.name)
        helper = HELPER

        def narrowed(wide: str) -> str:
            return f"{helper}<{NAME}, {wide}, {_NARROWED[wide]}>"

        for name in sorted(found.declared()):
            decl = found.locals[name]
            type_node = decl.child_by_field_name("type")
            assert type_node is not None
            rewrite.replace_node(type_node, narrowed(base_type(src.text(type_node))))
        for expr, wide in found.narrowed_exprs():
            for node in _wide_casts(src, expr):
                rewrite.replace_node(node, narrowed(base_type(src.text(node))))
            for node in descendants(expr, "identifier"):
                if src.text(node) in found.converted and _is_value(node):
                    rewrite.replace_node(node, f"{narrowed(found.converted[src.text(node)])}({src.text(node)})")
            for node in found.unsigned_operands(expr):
                rewrite.replace_node(node, f"{narrowed(wide)}({src.text(node)})")
        function = src.function.parent if src.function.parent is not None else src.function
        start = function.start_byte if function.type == "template_declaration" else src.function.start_byte
        indent = " " * (start - (src.data.rfind(b"\n", 0, start) + 1))
        if not _helper_before(src, start):
            rewrite.insert(
                start,
                f"// cutune: the type of index arithmetic, by {NAME} (64: the type as written)\n"
                f"{indent}template <int CutuneBits, typename CutuneWide, typename CutuneNarrow>\n"
                f"{indent}struct {helper}_type {{ using type = CutuneWide; }};\n"
                f"{indent}template <typename CutuneWide, typename CutuneNarrow>\n"
                f"{indent}struct {helper}_type<{NARROW}, CutuneWide, CutuneNarrow> {{ using type = CutuneNarrow; }};\n"
                f"{indent}template <int CutuneBits, typename CutuneWide, typename CutuneNarrow>\n"
                f"{indent}using {helper} =\n"
                f"{indent}    typename {helper}_type<CutuneBits, CutuneWide, CutuneNarrow>::type;\n\n{indent}",
            )
        rewrite.member(NAME, WIDE, _COMMENT, in_kernel=True)
        return rewrite.result()


class _Narrowing:
    """Which 64-bit integer locals of a kernel hold index arithmetic alone, and the 64-bit size arguments it reads."""

    def __init__(self, src: KernelSource) -> None:
        self.src = src
        kernel = src.kernel
        self.params = {
            p.name: base_type(p.type)
            for p in kernel.params
            if not any(c in p.type for c in "*&[") and base_type(p.type) in _NARROWED
        }
        self.constants = {tp.name for tp in kernel.template_params if tp.kind is TemplateParamKind.VALUE}
        # 32-bit (or narrower) integers: values that mix into narrowed arithmetic as they are
        self.integral = {
            p.name
            for p in kernel.params
            if not any(c in p.type for c in "*&[") and base_type(p.type) in INTEGRAL and p.name not in self.params
        }
        self.unsigned = {
            p.name
            for p in kernel.params
            if p.name in self.integral and base_type(p.type).startswith(("unsigned", "uint"))
        }
        declared: dict[str, list[Node]] = {}
        for decl in src.in_body("declaration"):
            type_node = decl.child_by_field_name("type")
            if type_node is None:
                continue
            base = base_type(src.text(type_node))
            for d in decl.children_by_field_name("declarator"):
                target = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
                if target is not None and target.type == "identifier":
                    declared.setdefault(src.text(target), []).append(decl)
                    if base in INTEGRAL and base not in _NARROWED:
                        self.integral.add(src.text(target))
                        if base.startswith(("unsigned", "uint")):
                            self.unsigned.add(src.text(target))
        wide = {n: ds for n, ds in declared.items() if any(_wide_decl(src, d) for d in ds)}
        self.wide = bool(wide) or bool(self.params)
        self.kept: list[str] = []
        # one declaration, of one name, every declarator initialised: a candidate for narrowing
        candidates: dict[str, Node] = {}
        for name, decls in wide.items():
            if len(decls) > 1 or len(decls[0].children_by_field_name("declarator")) > 1:
                self.kept.append(f"{name} is declared twice or beside other names (line {src.line(decls[0])})")
            else:
                candidates[name] = decls[0]
        writes: dict[str, list[Node]] = {}
        for node in src.in_body("assignment_expression", "update_expression"):
            target = node.child_by_field_name("left") or node.child_by_field_name("argument")
            value = node.child_by_field_name("right")
            if target is not None:
                writes.setdefault(src.text(target).strip(), []).extend([value] if value is not None else [])
        for name in [n for n in self.params if n in writes]:
            del self.params[name]  # an assigned argument is a variable: it keeps its type and its uses stay wide
        self.writes = writes
        self.escaping = {src.text(i): i for i in reversed(src.in_body("identifier")) if _escapes(i)}
        self.locals = dict(candidates)
        changed = True
        while changed:
            changed = False
            for name, decl in list(self.locals.items()):
                why = self._why_not(name, decl)
                if why is not None:
                    del self.locals[name]
                    self.kept.append(f"{name} {why}")
                    changed = True
        # a thread index (a local read from threadIdx, blockIdx, ..., with no division) keeps its declaration, the
        # form the loop transforms recognise, and is converted where narrowed arithmetic reads it, as an argument is
        self.indices = {
            name: base_type(src.field(decl, "type"))
            for name, decl in self.locals.items()
            if any(src.text(i) in _BUILTINS for i in descendants(decl, "identifier")) and not _divides(decl)
        }
        self.converted = {**self.params, **self.indices}
        # a 32-bit local whose value divides 64-bit arguments or indices: the division narrows, the local stays
        self.already_narrow: dict[str, tuple[Node, str]] = {}
        for name, decls in declared.items():
            value = _value(decls[0]) if len(decls) == 1 else None
            if name in wide or name not in self.integral or name in writes or value is None or not _divides(value):
                continue
            wide_type = self._wide_type(value)
            if wide_type is not None and self._foreign(value) is None:
                self.already_narrow[name] = (value, wide_type)
        # any other division or modulo of index arithmetic by or of a 64-bit value (in a subscript, a condition)
        self.divisions: list[tuple[Node, str]] = []
        taken = [(e.start_byte, e.end_byte) for e, _ in self.narrowed_exprs()]
        for node in sorted(src.in_body("binary_expression"), key=lambda n: (n.start_byte, -n.end_byte)):
            operator = node.child_by_field_name("operator")
            if operator is None or operator.type not in _OPERATORS:
                continue
            if any(a <= node.start_byte and node.end_byte <= b for a, b in taken):
                continue  # inside narrowed arithmetic already
            wide_type = self._wide_type(node)
            if wide_type is not None and self._foreign(node) is None:
                self.divisions.append((node, wide_type))
                taken.append((node.start_byte, node.end_byte))

    def _why_not(self, name: str, decl: Node) -> str | None:
        """Why local `name` keeps its 64 bits (None: it narrows)."""
        src = self.src
        value = _value(decl)
        if value is None:
            return f"is declared without a value (line {src.line(decl)})"
        for expr in (value, *self.writes.get(name, ())):
            bad = self._foreign(expr)
            if bad is not None:
                return f"is computed from `{src.text(bad)}` (line {src.line(bad)})"
        if name in self.escaping:
            return f"is passed by reference or to a function (line {src.line(self.escaping[name])})"
        return None

    def _foreign(self, node: Node) -> Node | None:
        """The first part of an expression that is not index arithmetic over narrowable values, if any."""
        src = self.src
        kind = node.type
        if kind == "number_literal":
            text = src.text(node).rstrip("uUlL")
            try:
                return node if int(text, 0) >= 2**31 else None
            except ValueError:
                return node  # a floating-point literal
        if kind == "identifier":
            text = src.text(node)
            ok = text in self.locals or text in self.params or text in self.constants or text in self.integral
            return None if ok or _MACRO.fullmatch(text) else node
        if kind == "field_expression":
            argument = node.child_by_field_name("argument")
            return None if argument is not None and src.text(argument) in _BUILTINS else node
        if kind in ("sizeof_expression", "comment"):
            return None
        if kind in ("cast_expression",):
            type_node = node.child_by_field_name("type")
            value = node.child_by_field_name("value")
            if type_node is None or value is None or base_type(src.text(type_node)) not in INTEGRAL:
                return node
            return self._foreign(value)
        if kind == "call_expression":
            function = node.child_by_field_name("function")
            arguments = node.child_by_field_name("arguments")
            if function is None or arguments is None or not _integral_call(src, function):
                return node
            return next((f for a in arguments.named_children if (f := self._foreign(a)) is not None), None)
        if kind in ("binary_expression", "parenthesized_expression", "unary_expression", "conditional_expression"):
            return next((f for c in node.named_children if (f := self._foreign(c)) is not None), None)
        return node

    def declared(self) -> dict[str, Node]:
        """The locals declared with the narrowed type (the thread indices are not), by name."""
        return {name: decl for name, decl in self.locals.items() if name not in self.indices}

    def _wide_type(self, value: Node) -> str | None:
        """The 64-bit type an expression computes in as written (of its first 64-bit operand), if it does."""
        for node in descendants(value, "identifier"):
            name = self.src.text(node)
            if name in self.converted:
                return self.converted[name]
            if name in self.locals:
                return base_type(self.src.field(self.locals[name], "type"))
        casts = _wide_casts(self.src, value)
        return base_type(self.src.text(casts[0])) if casts else None

    def narrowed_exprs(self) -> list[tuple[Node, str]]:
        """The initialisers and assigned values of the locals declared narrowed, each with the local's type, and
        the values of the 32-bit locals that divide 64-bit operands, each with their 64-bit type."""
        found = [*self.already_narrow.values(), *self.divisions]
        for name, decl in self.declared().items():
            init = next(iter(decl.children_by_field_name("declarator")))
            value = init.child_by_field_name("value")
            wide = base_type(self.src.field(decl, "type"))
            found += [(e, wide) for e in (*([value] if value is not None else []), *self.writes.get(name, ()))]
        return found

    def unsigned_operands(self, expr: Node) -> list[Node]:
        """The 32-bit unsigned operands (`threadIdx.x`, an `unsigned` argument) that meet a 64-bit operand in
        `expr`: as written they convert to the signed 64-bit type; narrowed, the signed 32-bit one would convert
        to unsigned instead (a difference below zero would wrap), so they are converted to the narrowed type."""
        found = []
        for node in descendants(expr, "binary_expression"):
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            for operand, other in ((left, right), (right, left)):
                if operand is not None and other is not None and self._unsigned(operand) and self._wide(other):
                    found.append(operand)
        return found

    def _unsigned(self, node: Node) -> bool:
        if node.type == "field_expression":
            argument = node.child_by_field_name("argument")
            return argument is not None and self.src.text(argument) in _BUILTINS
        return node.type == "identifier" and self.src.text(node) in self.unsigned

    def _wide(self, node: Node) -> bool:
        """Whether an operand has a 64-bit type as written (reads a narrowed value or converts to a 64-bit type)."""
        if any(
            self.src.text(i) in self.locals or self.src.text(i) in self.converted
            for i in descendants(node, "identifier")
        ):
            return True
        return bool(_wide_casts(self.src, node))

    def gains(self) -> bool:
        """Whether the narrowed arithmetic holds a division or modulo."""
        return any(_divides(expr) for expr, _ in self.narrowed_exprs())


def _helper_before(src: KernelSource, at: int) -> bool:
    """Whether the file declares the type helper before byte `at`, in the kernel's namespace."""
    if f"using {HELPER} =".encode() not in src.data[:at]:
        return False  # most files: no tree walk
    here = namespaces_at(src.function)
    for node in descendants(src.root, "alias_declaration"):
        name = node.child_by_field_name("name")
        if node.start_byte < at and name is not None and src.text(name) == HELPER and namespaces_at(node) == here:
            return True
    return False


def _value(decl: Node) -> Node | None:
    """The initial value of a declaration's one declarator (None: several, or none)."""
    declarators = decl.children_by_field_name("declarator")
    if len(declarators) != 1 or declarators[0].type != "init_declarator":
        return None
    return declarators[0].child_by_field_name("value")


def _divides(node: Node) -> bool:
    """Whether an expression holds a division or modulo."""
    return any(
        (op := b.child_by_field_name("operator")) is not None and op.type in _OPERATORS
        for b in descendants(node, "binary_expression")
    )


def _wide_decl(src: KernelSource, decl: Node) -> bool:
    type_node = decl.child_by_field_name("type")
    return type_node is not None and base_type(src.text(type_node)) in _NARROWED


def _integral_call(src: KernelSource, function: Node) -> bool:
    """Whether a call is a conversion to an integral type (`int64_t(x)`, `static_cast<size_t>(x)`) or min/max."""
    text = src.text(function)
    if function.type == "template_function":
        name = function.child_by_field_name("name")
        args = function.child_by_field_name("arguments")
        return (
            name is not None
            and src.text(name) == "static_cast"
            and args is not None
            and base_type(src.text(args).strip("<>")) in INTEGRAL
        )
    return base_type(text) in INTEGRAL or text in _MIN_MAX


def _wide_casts(src: KernelSource, expr: Node) -> list[Node]:
    """The type nodes of the conversions to 64-bit types inside an expression."""
    found = []
    for node in descendants(expr, "cast_expression", "call_expression"):
        if node.type == "cast_expression":
            descriptor = node.child_by_field_name("type")
            target = descriptor.child_by_field_name("type") if descriptor is not None else None
        else:
            function = node.child_by_field_name("function")
            target = function
            if function is not None and function.type == "template_function":
                args = function.child_by_field_name("arguments")
                descriptor = args.named_children[0] if args is not None and args.named_children else None
                target = descriptor.child_by_field_name("type") if descriptor is not None else None
        if target is not None and base_type(src.text(target)) in _NARROWED:
            found.append(target)
    return found


def _is_value(ident: Node) -> bool:
    """Whether an identifier is read as a value (not a call's function or a field name)."""
    parent = ident.parent
    return parent is None or parent.type != "call_expression" or parent.child_by_field_name("function") != ident


def _escapes(ident: Node) -> bool:
    """Whether a use hands the variable to something that may need its exact type: an argument of a call (other
    than a conversion or min/max) or `&x`."""
    parent = ident.parent
    if parent is None:
        return False
    if parent.type == "pointer_expression" and parent.child_by_field_name("operator") is not None:
        return parent.text is not None and parent.text.startswith(b"&")
    if parent.type == "argument_list" and parent.parent is not None:
        function = parent.parent.child_by_field_name("function")
        text = function.text.decode() if function is not None and function.text is not None else ""
        callee = text.split("<")[0].strip()
        return base_type(callee) not in INTEGRAL and callee not in _MIN_MAX and callee != "static_cast"
    return False
