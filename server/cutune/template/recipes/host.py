"""Where a launch's block or grid size comes from in host code: a literal, a tuning-struct member, or
a value only known at run time. Follows local variables (`dim3 block(256)`, `constexpr uint N = 128;`,
`const int threads = 512;`) back to their initializers, and the parameters of a host function template
(`launch<T, 256>(...)`) or of a function-like macro (`LAUNCH(256)`) to each place that instantiates them."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.syntax import declarator_name, int_value
from cutune.template.recipes.base import KernelSource, descendants

_MAX_DEPTH = 4  # instantiations followed through at most this many host templates and macros

_NAME = re.compile(r"[A-Za-z_]\w*")
_QUALIFIED = re.compile(r"(?:[A-Za-z_]\w*::)+[A-Za-z_]\w*")
_MIN_CALLS = frozenset(("min", "umin", "llmin", "ullmin"))


class OriginKind(enum.Enum):
    LITERAL = "literal"  # an integer literal a rewrite can replace
    MEMBER = "member"  # already `<kernel>_tuning::NAME`
    RUNTIME = "runtime"  # computed at run time, with no literal to tune
    MULTI_DIM = "multi_dim"  # a dim3 with more than one dimension above 1
    MACRO = "macro"  # a #define, which templatize does not rewrite
    PARAM = "param"  # a parameter of the host function template or #define around the launch


@dataclass(frozen=True)
class Origin:
    """Where one launch value comes from; `node` is the literal, or the expression the search ended at."""

    kind: OriginKind
    node: Node
    value: int | None = None
    name: str | None = None  # MEMBER: the member; MACRO: the macro
    capped: bool = False  # LITERAL as the cap of `min(run-time value, literal)`
    note: str = ""  # RUNTIME: why nothing compile-time was found, when more can be said


def _enclosing_function(node: Node) -> Node:
    """The function definition around a node (the node itself when there is none)."""
    current: Node | None = node
    while current is not None and current.type != "function_definition":
        current = current.parent
    return current or node


def _macro_of(call: Node) -> str | None:
    """The macro a launch parsed from a `#define` body belongs to (its tree's one function), else None."""
    node = _enclosing_function(call)
    if node.type != "function_definition" or node.parent is None or node.parent.parent is not None:
        return None
    declarator = node.child_by_field_name("declarator")
    name = declarator.child_by_field_name("declarator") if declarator is not None else None
    return name.text.decode() if name is not None and name.text is not None else None


def _template_params(src: KernelSource, function: Node) -> list[str]:
    """The template parameter names of a function template (none for a plain function)."""
    owner = function.parent
    params = (
        owner.child_by_field_name("parameters") if owner is not None and owner.type == "template_declaration" else None
    )
    names = []
    for p in params.named_children if params is not None else []:
        ident = declarator_name(p.child_by_field_name("declarator")) or p.child_by_field_name("name")
        if ident is None:  # `typename T`: the name is the last type identifier
            ident = next((c for c in reversed(p.named_children) if c.type == "type_identifier"), None)
        names.append(src.text(ident) if ident is not None else "")
    return names


def _function_name(src: KernelSource, function: Node) -> str:
    declarator = function.child_by_field_name("declarator")
    name = declarator.child_by_field_name("declarator") if declarator is not None else None
    return src.text(name).split("::")[-1] if name is not None else ""


def launch_config(call: Node) -> list[Node]:
    """The expressions of a launch's `<<<grid, block[, smem[, stream]]>>>`."""
    config = next((c for c in call.children if c.type == "kernel_call_syntax"), None)
    return [c for c in config.named_children if c.type != "comment"] if config is not None else []


class HostResolver:
    """Resolves launch expressions inside the host function around one launch."""

    def __init__(self, src: KernelSource, call: Node) -> None:
        self.src = src
        # (function, offset): where local declarations before the launch are looked up, innermost first
        self.scopes: list[tuple[Node, int]] = []
        function = src.node_at(call.start_byte, "function_definition")
        macro = _macro_of(call) if function is None else None
        self.macro = macro
        if function is not None:
            self.scopes.append((function, call.start_byte))
        elif macro is not None:  # a launch inside a #define: the macro's own locals, then where it is used
            self.scopes.append((_enclosing_function(call), call.start_byte))
            use = src.macro_use(macro)
            outer = src.node_at(use, "function_definition") if use is not None else None
            if use is not None and outer is not None:
                self.scopes.append((outer, use))

    def resolve(self, node: Node) -> Origin:
        """The origin of the value of an expression."""
        src, t = self.src, node.type
        if t == "number_literal":
            value = int_value(src.text(node))
            return Origin(OriginKind.LITERAL, node, value) if value is not None else Origin(OriginKind.RUNTIME, node)
        if t == "parenthesized_expression" and node.named_child_count == 1:
            return self.resolve(node.named_children[0])
        # names parse as identifiers, types (`dim3 grid(n)`, `k<T, N>`) or qualified names: read the text
        text = "".join(src.text(node).split())
        if _NAME.fullmatch(text):
            return self._resolve_name(node, text)
        scope, _, member = text.rpartition("::")
        if _QUALIFIED.fullmatch(text) and scope.split("::")[-1] == src.struct_name:
            return Origin(OriginKind.MEMBER, node, src.member_int(member), member)
        if t == "call_expression":
            return self._resolve_call(node)
        if t in ("initializer_list", "compound_literal_expression"):
            return self.resolve_dims(node, self.arguments(node))
        return Origin(OriginKind.RUNTIME, node)

    def resolve_all(self, node: Node, depth: int = 0) -> list[tuple[Origin, HostResolver]]:
        """The origins of an expression at every instantiation of the host template or macro it is written
        in (one for plain host code), each with the resolver of the place it was found."""
        origin = self.resolve(node)
        if origin.kind is not OriginKind.PARAM or origin.name is None:
            return [(origin, self)]
        where = self._param_owner(origin.name)
        found = [
            pair
            for arg, resolver in (self.instances(origin.name) if depth < _MAX_DEPTH else [])
            for pair in resolver.resolve_all(arg, depth + 1)
        ]
        return found or [
            (Origin(OriginKind.RUNTIME, node, note=f"a parameter of {where} that nothing here sets"), self)
        ]

    def instances(self, name: str) -> list[tuple[Node, HostResolver]]:
        """What each use of the macro, or each call of the host function template, passes for its parameter
        `name`, with a resolver at that use (calls that deduce their template arguments are skipped)."""
        if self.macro is not None and name in self._macro_params():
            index = self._macro_params().index(name)
            uses = [c for c in self.src.all_calls if self._callee(c) == self.macro and self._in_function(c)]
            return [
                (args[index], HostResolver(self.src, use)) for use in uses if len(args := self.arguments(use)) > index
            ]
        for function, _ in self.scopes:
            params = _template_params(self.src, function)
            if name not in params:
                continue
            fname, index = _function_name(self.src, function), params.index(name)
            found = []
            for call in self.src.all_calls:
                fn = call.child_by_field_name("function")
                while fn is not None and fn.type == "qualified_identifier":
                    fn = fn.child_by_field_name("name")
                targs = (
                    fn.child_by_field_name("arguments") if fn is not None and fn.type == "template_function" else None
                )
                if (
                    targs is None
                    or self._callee(call) != fname
                    or any(c.type == "kernel_call_syntax" for c in call.children)
                ):
                    continue
                args = self.arguments(targs)
                if len(args) > index:
                    found.append((args[index], HostResolver(self.src, call)))
            return found
        return []

    def resolve_dims(self, at: Node, dims: list[Node]) -> Origin:
        """The origin of the x dimension of a dim3, or MULTI_DIM when y or z is not 1."""
        if not dims:
            return Origin(OriginKind.RUNTIME, at)
        if any(int_value(self.src.text(d)) != 1 for d in dims[1:]):
            return Origin(OriginKind.MULTI_DIM, at)
        return self.resolve(dims[0])

    def dims_of(self, node: Node) -> tuple[Node, list[Node]] | None:
        """For a dim3-valued expression (a local dim3 or `dim3(...)`, or a dim3 local set member by member): the
        node holding its arguments, and the arguments; None for anything else."""
        if node.type == "identifier":
            found = self.declaration(self.src.text(node))
            if found is None:
                return self._assigned_dims(self.src.text(node))
            if not self._is_dim3(found[0]):
                return None
            holder, values = found[1], found[2]
            if len(values) == 1 and values[0].type == "call_expression" and self._callee(values[0]) == "dim3":
                return values[0], self.arguments(values[0])
            return holder, values
        if node.type == "call_expression" and self._callee(node) == "dim3":
            return node, self.arguments(node)
        return None

    def _assigned_dims(self, name: str) -> tuple[Node, list[Node]] | None:
        """A dim3 local declared without a value and set member by member before the launch (`dim3 block;
        block.x = NUM_THREADS;`): its declaration and the values of x, then y (and z) where set; None where a member
        is set twice, by another operator, in a block the launch is not in, or the local as a whole."""
        for function, before in self.scopes:
            declared = [
                d
                for d in descendants(function, "declaration")
                if d.end_byte <= before
                and self._is_dim3(d)
                and any(
                    c.type == "identifier" and self.src.text(c) == name for c in d.children_by_field_name("declarator")
                )
            ]
            if not declared:
                continue
            members: dict[str, Node] = {}
            for a in descendants(function, "assignment_expression"):
                left, right = a.child_by_field_name("left"), a.child_by_field_name("right")
                if not declared[-1].end_byte <= a.start_byte < before or left is None or right is None:
                    continue
                target = "".join(self.src.text(left).split())
                member = target.removeprefix(f"{name}.") if target.startswith(f"{name}.") else None
                if target == name or (member is not None and member not in ("x", "y", "z")):
                    return None
                if member is None:
                    continue
                block = a.parent.parent if a.parent is not None else None
                if (
                    member in members
                    or self.src.field(a, "operator") != "="
                    or block is None
                    or not block.start_byte <= before < block.end_byte
                ):
                    return None
                members[member] = right
            if "x" not in members or ("z" in members and "y" not in members):
                return None
            return declared[-1], [members[m] for m in "xyz" if m in members]
        return None

    def declaration(self, name: str) -> tuple[Node, Node, list[Node]] | None:
        """The last local declaration of `name` before the launch: (declaration, the node holding its
        initializer, the initializer's values: one expression, or constructor arguments)."""
        for function, before in self.scopes:
            found = self._declaration_in(function, before, name)
            if found is not None:
                return found
        return None

    def _declaration_in(self, function: Node, before: int, name: str) -> tuple[Node, Node, list[Node]] | None:
        best: tuple[Node, Node, list[Node]] | None = None
        for decl in descendants(function, "declaration"):
            if decl.end_byte > before:
                break
            for declarator in decl.children_by_field_name("declarator"):
                ident = declarator_name(declarator)
                if ident is None or self.src.text(ident) != name:
                    continue
                if declarator.type == "init_declarator":
                    value = declarator.child_by_field_name("value")
                    if value is not None:
                        values = (
                            self.arguments(value) if value.type in ("argument_list", "initializer_list") else [value]
                        )
                        best = (decl, value, values)
                elif declarator.type == "function_declarator":  # `dim3 grid(n);` parses as a function declaration
                    params = declarator.child_by_field_name("parameters")
                    if params is not None:
                        best = (decl, params, self.arguments(params))
        return best

    def closure(self, node: Node) -> list[Node]:
        """The expression and, transitively, the initializers of the local variables it uses."""
        seen: set[str] = set()
        out = [node]
        pending = [node]
        while pending:
            current = pending.pop()
            for ident in descendants(current, "identifier", "type_identifier"):
                name = self.src.text(ident)
                found = None if name in seen else self.declaration(name)
                seen.add(name)
                if found is not None:
                    out.extend(found[2])
                    pending.extend(found[2])
        return out

    def arguments(self, node: Node) -> list[Node]:
        """The argument expressions of a call, argument list or braced list."""
        if node.type == "call_expression":
            args = node.child_by_field_name("arguments")
            return self.arguments(args) if args is not None else []
        if node.type == "compound_literal_expression":
            value = node.child_by_field_name("value")
            return self.arguments(value) if value is not None else []
        return [c for c in node.named_children if c.type != "comment"]

    def _resolve_name(self, node: Node, name: str) -> Origin:
        found = self.declaration(name)
        if found is not None:
            decl, holder, values = found
            if self._is_dim3(decl):
                return self.resolve_dims(holder, values)
            return self.resolve(values[0]) if len(values) == 1 else Origin(OriginKind.RUNTIME, node)
        if self._param_owner(name):
            return Origin(OriginKind.PARAM, node, name=name)
        if any(m.name == name for m in self.src.model.macros):
            return Origin(OriginKind.MACRO, node, name=name)
        return Origin(OriginKind.RUNTIME, node)

    def _param_owner(self, name: str) -> str:
        """`the macro X` or `the host function template f` whose parameter `name` is, else ''."""
        if self.macro is not None and name in self._macro_params():
            return f"the macro {self.macro}"
        for function, _ in self.scopes:
            if name in _template_params(self.src, function):
                return f"the host function template {_function_name(self.src, function)}"
        return ""

    def _macro_params(self) -> list[str]:
        """The parameters of the function-like macro the launch is written in."""
        macro = next((m for m in self.src.model.macros if m.name == self.macro), None)
        node = self.src.root.descendant_for_byte_range(macro.span.start_byte, macro.span.start_byte) if macro else None
        while node is not None and node.type != "preproc_function_def":
            node = node.parent
        params = node.child_by_field_name("parameters") if node is not None else None
        return [self.src.text(p) for p in params.named_children] if params is not None else []

    def _in_function(self, node: Node) -> bool:
        return self.src.node_at(node.start_byte, "function_definition") is not None

    def _resolve_call(self, node: Node) -> Origin:
        callee = self._callee(node)
        args = self.arguments(node)
        if callee == "dim3":
            return self.resolve_dims(node, args)
        if callee in _MIN_CALLS and len(args) == 2:
            first, second = self.resolve(args[0]), self.resolve(args[1])
            literal = [o for o in (first, second) if o.kind in (OriginKind.LITERAL, OriginKind.MEMBER)]
            if len(literal) == 1:
                return Origin(literal[0].kind, literal[0].node, literal[0].value, literal[0].name, capped=True)
        return Origin(OriginKind.RUNTIME, node)

    def _callee(self, call: Node) -> str:
        fn = call.child_by_field_name("function")
        return self.src.text(fn).split("<")[0].split("::")[-1].strip() if fn is not None else ""

    def _is_dim3(self, decl: Node) -> bool:
        type_node = decl.child_by_field_name("type")
        return type_node is not None and self.src.text(type_node).strip() == "dim3"


def launch_ex_blocks(src: KernelSource) -> list[tuple[Node, Node | None]]:
    """The kernel's `cudaLaunchKernelEx(&config, kernel, args...)` launches in the file, each with the expression
    its `config.blockDim` is last set to before the call in the same function (None where nothing sets it). The
    kernel is named in the call (`ns::k<T>`) or by a local set to it (`auto kernel = k<T>;`)."""
    found: list[tuple[Node, Node | None]] = []
    for call in src.all_calls:
        fn = call.child_by_field_name("function")
        if fn is None or src.text(fn).split("::")[-1].strip() != "cudaLaunchKernelEx":
            continue
        resolver = HostResolver(src, call)
        args = resolver.arguments(call)
        if len(args) < 2 or args[0].type != "pointer_expression" or src.field(args[0], "operator") != "&":
            continue
        target = args[1]
        if target.type == "identifier" and (declared := resolver.declaration(src.text(target))) is not None:
            target = declared[2][0] if len(declared[2]) == 1 else target
        if src.text(target).split("<")[0].split("::")[-1].strip() != src.kernel.name:
            continue
        config = src.field(args[0], "argument").strip()
        function = src.node_at(call.start_byte, "function_definition")
        block: Node | None = None
        for node in descendants(function, "assignment_expression") if function is not None else []:
            left = node.child_by_field_name("left")
            if node.start_byte > call.start_byte:
                break
            if left is not None and "".join(src.text(left).split()) in (f"{config}.blockDim", f"{config}->blockDim"):
                block = node.child_by_field_name("right")
        found.append((call, block))
    return found


def launched_one_dimensional(src: KernelSource) -> bool:
    """Whether the file launches the kernel with `<<<...>>>`, always on a 1-D grid of 1-D blocks: each size a scalar,
    or a dim3 whose y and z are 1. False where it does not launch it there, or a size's shape cannot be read."""
    launches = src.launches()
    if not launches or launch_ex_blocks(src):
        return False
    for _, call in launches:
        resolver = HostResolver(src, call)
        config = launch_config(call)
        if len(config) < 2:
            return False
        for size in config[:2]:
            dims = resolver.dims_of(size)
            if dims is not None and (not dims[1] or any(int_value(src.text(d)) != 1 for d in dims[1][1:])):
                return False
    return True


def launched_block_x(src: KernelSource) -> list[tuple[Node, Node | None]]:
    """Each launch of the kernel in the file (`<<<...>>>` and cudaLaunchKernelEx) with the expression of its block's
    x size (None where it cannot be read)."""
    blocks = [
        (call, config[1] if len(config) > 1 else None) for _, call in src.launches() for config in [launch_config(call)]
    ]
    found: list[tuple[Node, Node | None]] = []
    for call, block in [*blocks, *launch_ex_blocks(src)]:
        dims = HostResolver(src, call).dims_of(block) if block is not None else None
        found.append((call, (dims[1][0] if dims[1] else None) if dims is not None else block))
    return found
