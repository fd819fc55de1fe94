"""The file- and namespace-scope declarations of a parsed CUDA file, with their scope and guards."""

from __future__ import annotations

import bisect
import enum
import functools
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.syntax import declarator_name, node_text


class DeclKind(enum.Enum):
    KERNEL = "kernel"  # a __global__ function definition
    DEVICE_FUNCTION = "device_function"  # __device__ / __host__ __device__ definition
    FUNCTION_DECLARATION = "function_declaration"  # a prototype (device-side when `device`)
    HOST_FUNCTION = "host_function"  # a definition without an execution space: host only
    TYPE = "type"  # struct/class/union/enum/typedef/using alias/namespace alias
    VARIABLE = "variable"  # a global or namespace-scope variable
    USING = "using"  # using-directive or using-declaration
    MACRO = "macro"
    INCLUDE = "include"
    OTHER = "other"  # static_assert, explicit instantiation, #pragma, ...


_SPACES = frozenset(("__global__", "__device__", "__host__"))
_DEVICE_STORAGE = frozenset(("__device__", "__constant__", "__managed__", "__shared__"))
_TYPE_SPECIFIERS = frozenset(("struct_specifier", "class_specifier", "union_specifier", "enum_specifier"))


@dataclass(frozen=True, slots=True)
class Decl:
    """One declaration; `start`/`end` cover its `template <...>` line and trailing `;`."""

    kind: DeclKind
    names: tuple[str, ...]  # the unqualified names it declares (enum constants included)
    namespace: tuple[str, ...]  # enclosing namespaces ("" for an anonymous one)
    node: Node  # the outermost node (template_declaration / linkage_specification when present)
    item: Node  # the function_definition, declaration, specifier or directive itself
    start: int
    end: int
    device: bool  # usable from device code
    extern_c: bool = False  # written `extern "C" <decl>` (its text carries the linkage)
    in_extern_c_block: bool = False  # inside `extern "C" { ... }` (its text does not)
    conditions: tuple[str, ...] = ()  # preprocessor conditions it sits under, as #if expressions
    scope: str = ""  # for out-of-class definitions `S::f`, the qualifier `S`

    @property
    def name(self) -> str:
        """The first declared name ('' for anonymous declarations)."""
        return self.names[0] if self.names else ""


@dataclass(frozen=True, slots=True)
class _Context:
    namespace: tuple[str, ...] = ()
    conditions: tuple[str, ...] = ()
    c_block: bool = False


def collect_decls(root: Node, data: bytes) -> list[Decl]:
    """Every declaration at file or namespace scope, in source order (error regions searched too)."""
    out: list[Decl] = []
    _walk(root.children, data, _Context(), out)
    return out


def _walk(items: list[Node], data: bytes, ctx: _Context, out: list[Decl]) -> None:
    for i in range(len(items)):
        _walk_item(items, i, data, ctx, out)


def _walk_item(items: list[Node], i: int, data: bytes, ctx: _Context, out: list[Decl]) -> None:
    """The declarations of `items[i]` (those of a namespace, `extern "C"` block or `#if` it opens included)."""
    child = items[i]
    t = child.type
    if t == "namespace_definition":
        body = child.child_by_field_name("body")
        if body is not None:
            inner = _Context(ctx.namespace + _namespace_names(child, data), ctx.conditions, ctx.c_block)
            _walk(body.children, data, inner, out)
    elif t == "linkage_specification":
        body = child.child_by_field_name("body")
        if body is not None and body.type == "declaration_list":
            _walk(body.children, data, _Context(ctx.namespace, ctx.conditions, True), out)
        elif body is not None:
            _add(body, child, _next(items, i), data, ctx, out, extern_c=True)
    elif t in ("preproc_if", "preproc_ifdef"):
        _walk_conditional(child, data, ctx, out)
    elif t == "ERROR":
        _walk(child.children, data, ctx, out)
    elif child.is_named and t != "comment":
        _add(child, child, _next(items, i), data, ctx, out)


def _next(items: list[Node], i: int) -> Node | None:
    return items[i + 1] if i + 1 < len(items) else None


def _namespace_names(node: Node, data: bytes) -> tuple[str, ...]:
    name = node.child_by_field_name("name")
    if name is None:
        return ("",)
    if name.type == "nested_namespace_specifier":
        return tuple(node_text(data, c) for c in name.named_children if c.type == "namespace_identifier")
    return (node_text(data, name),)


def _walk_conditional(node: Node, data: bytes, ctx: _Context, out: list[Decl]) -> None:
    """Walk an #if/#ifdef/#elif/#else chain; each branch's declarations get the condition they need."""
    taken: list[str] = []  # conditions of the earlier branches, which must all be false
    branch: Node | None = node
    while branch is not None:
        items = [
            c
            for i, c in enumerate(branch.children)
            if branch.field_name_for_child(i) not in ("condition", "name", "alternative")
        ]
        own = _branch_condition(branch, items, data)
        conds = ctx.conditions + tuple(f"!({c})" for c in taken) + ((own,) if own else ())
        if own:
            taken.append(own)
        _walk(items, data, _Context(ctx.namespace, conds, ctx.c_block), out)
        branch = branch.child_by_field_name("alternative")


def _branch_condition(branch: Node, items: list[Node], data: bytes) -> str:
    """The #if expression a branch adds; '' for #else and for include guards."""
    if branch.type in ("preproc_if", "preproc_elif"):
        cond = branch.child_by_field_name("condition")
        return node_text(data, cond).strip() if cond is not None else ""
    if branch.type in ("preproc_ifdef", "preproc_elifdef"):
        name_node = branch.child_by_field_name("name")
        if name_node is None:
            return ""
        name = node_text(data, name_node)
        negate = node_text(data, branch.children[0]).strip().endswith("ndef")
        first = next((c for c in items if c.is_named and c.type != "comment"), None)
        if negate and first is not None and first.type == "preproc_def":
            guard = first.child_by_field_name("name")
            if guard is not None and node_text(data, guard) == name and first.child_by_field_name("value") is None:
                return ""  # `#ifndef X` + `#define X`: an include guard (`#define X 128` is a default, -DX= wins)
        return f"!defined({name})" if negate else f"defined({name})"
    return ""


def _specifiers(node: Node) -> set[str]:
    """The CUDA execution-space / storage keywords written directly on a declaration."""
    found: set[str] = set()
    for c in node.children:
        if c.type in _SPACES or c.type in _DEVICE_STORAGE:
            found.add(c.type)
        elif c.type in ("type_qualifier", "storage_class_specifier") and c.child_count == 1:
            found.add(c.children[0].type)
    return found


def _add(
    item: Node,
    outer: Node,
    following: Node | None,
    data: bytes,
    ctx: _Context,
    out: list[Decl],
    *,
    extern_c: bool = False,
) -> None:
    """Classify one declaration and append it."""
    template_outer = outer
    while item.type == "template_declaration":
        inner = next((c for c in item.named_children if c.type not in ("template_parameter_list", "comment")), None)
        if inner is None:
            return
        item = inner
    end = outer.end_byte
    if following is not None and following.type == ";" and not following.is_named:
        end = following.end_byte
    kind, names, device, scope = _classify(item, data)
    if kind is None:
        return
    out.append(
        Decl(
            kind=kind,
            names=names,
            namespace=ctx.namespace,
            node=template_outer,
            item=item,
            start=outer.start_byte,
            end=end,
            device=device,
            extern_c=extern_c,
            in_extern_c_block=ctx.c_block,
            conditions=ctx.conditions,
            scope=scope,
        )
    )


def _classify(item: Node, data: bytes) -> tuple[DeclKind | None, tuple[str, ...], bool, str]:
    """(kind, declared names, usable on the device, qualifier of an out-of-class definition)."""
    t = item.type
    if t == "function_definition":
        specs = _specifiers(item)
        name, scope = _function_name(item, data)
        if "__global__" in specs:
            return DeclKind.KERNEL, (name,), True, scope
        if "__device__" in specs:
            return DeclKind.DEVICE_FUNCTION, (name,), True, scope
        constexpr = "constexpr" in specs
        return DeclKind.HOST_FUNCTION, (name,), constexpr, scope
    if t in ("declaration", "field_declaration"):
        return _classify_declaration(item, data)
    if t in _TYPE_SPECIFIERS:
        return DeclKind.TYPE, _type_names(item, data), True, ""
    if t == "type_definition":
        names = tuple(
            node_text(data, n)
            for d in item.children_by_field_name("declarator")
            if (n := declarator_name(d)) is not None
        )
        return DeclKind.TYPE, names, True, ""
    if t in ("alias_declaration", "namespace_alias_definition"):
        alias = item.child_by_field_name("name")
        return DeclKind.TYPE, ((node_text(data, alias),) if alias is not None else ()), True, ""
    if t == "using_declaration":
        return DeclKind.USING, (), True, ""
    if t in ("preproc_def", "preproc_function_def"):
        macro = item.child_by_field_name("name")
        return DeclKind.MACRO, ((node_text(data, macro),) if macro is not None else ()), True, ""
    if t == "preproc_include":
        return DeclKind.INCLUDE, (), True, ""
    return DeclKind.OTHER, (), False, ""


def _function_name(func: Node, data: bytes) -> tuple[str, str]:
    """The unqualified name of a function definition and the qualifier of `S::f` ('' when none)."""
    declarator = func.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    if declarator is None:
        return "", ""
    target = declarator.child_by_field_name("declarator")
    scope = ""
    if target is not None and target.type == "qualified_identifier":
        scope_node = target.child_by_field_name("scope")
        scope = node_text(data, scope_node) if scope_node is not None else ""
    name = declarator_name(target)
    return (node_text(data, name) if name is not None else ""), scope


def _type_names(spec: Node, data: bytes) -> tuple[str, ...]:
    names: list[str] = []
    name = spec.child_by_field_name("name")
    if name is not None:
        # `struct S<int>` (a specialization) declares S
        names.append(node_text(data, declarator_name(name) or name))
    if spec.type == "enum_specifier":
        body = spec.child_by_field_name("body")
        if body is not None:
            for e in body.named_children:
                en = e.child_by_field_name("name") if e.type == "enumerator" else None
                if en is not None:
                    names.append(node_text(data, en))
    return tuple(names)


def _classify_declaration(item: Node, data: bytes) -> tuple[DeclKind | None, tuple[str, ...], bool, str]:
    specs = _specifiers(item)
    declarators = item.children_by_field_name("declarator")
    type_node = item.child_by_field_name("type")
    extra: tuple[str, ...] = ()
    if type_node is not None and type_node.type in _TYPE_SPECIFIERS and type_node.child_by_field_name("body"):
        extra = _type_names(type_node, data)  # `struct S {...} s;` declares S too
    if declarators and all(_is_function(d) for d in declarators):
        names = tuple(_function_name_of_declarator(d, data) for d in declarators)
        device = bool(specs & {"__device__", "__global__"})
        return DeclKind.FUNCTION_DECLARATION, names, device, ""
    names = extra + tuple(node_text(data, n) for d in declarators if (n := declarator_name(d)) is not None)
    if not declarators and extra:
        return DeclKind.TYPE, extra, True, ""
    device = bool(specs & (_DEVICE_STORAGE | {"constexpr"})) or ("const" in specs and not _has_class_type(item))
    return DeclKind.VARIABLE, names, device, ""


def _is_function(declarator: Node) -> bool:
    node: Node | None = declarator
    while node is not None:
        if node.type == "function_declarator":
            return True
        if node.type == "init_declarator":
            return False
        node = node.child_by_field_name("declarator")
    return False


def _function_name_of_declarator(declarator: Node, data: bytes) -> str:
    name = declarator_name(declarator)
    return node_text(data, name) if name is not None else ""


def _has_class_type(item: Node) -> bool:
    """Whether a `const` variable has a class type (then it is a host object, not a constant)."""
    type_node = item.child_by_field_name("type")
    return type_node is not None and type_node.type in ("qualified_identifier", "template_type")


FUNCTION_KINDS = frozenset((DeclKind.KERNEL, DeclKind.DEVICE_FUNCTION, DeclKind.HOST_FUNCTION))
# the top-level parts `_walk_item` looks into, whose declarations may be of any kind
_CONTAINERS = frozenset(("namespace_definition", "linkage_specification", "preproc_if", "preproc_ifdef", "ERROR"))
_DIRECTIVES = frozenset(("preproc_def", "preproc_function_def", "preproc_include"))


class Declarations:
    """A parsed file's declarations (see `collect_decls`), each top-level part walked the first time an answer
    needs it: on a file of thousands of definitions, finding one kernel's declarations, or the function around
    one offset, costs the parts they are in, not the file."""

    def __init__(self, root: Node, data: bytes) -> None:
        self._data = data
        self._parts = root.children
        self._starts = [p.start_byte for p in self._parts]
        self._walked: dict[int, list[Decl]] = {}
        self._holding: dict[str, list[Decl]] = {}

    @functools.cached_property
    def all(self) -> list[Decl]:
        """Every declaration, in source order: `collect_decls`'s list."""
        return [d for i in range(len(self._parts)) for d in self._part(i)]

    def holding(self, text: str) -> list[Decl]:
        """The declarations, in source order, of the parts whose text holds `text`: all those that declare it as a
        name, or that are written with it as a keyword (of thousands of definitions, a few)."""
        found = self._holding.get(text)
        if found is None:
            encoded, wanted = text.encode(), set()
            at = self._data.find(encoded)
            while at >= 0:
                wanted.add(bisect.bisect_right(self._starts, at) - 1)
                at = self._data.find(encoded, at + max(len(encoded), 1))
            found = self._holding[text] = [d for i in sorted(wanted) if i >= 0 for d in self._part(i)]
        return found

    @functools.cached_property
    def directives(self) -> list[Decl]:
        """The `#define`s and `#include`s, in source order (only the parts that are or may hold one are walked)."""
        parts = (i for i, p in enumerate(self._parts) if p.type in _DIRECTIVES or p.type in _CONTAINERS)
        return [d for i in parts for d in self._part(i) if d.kind in (DeclKind.MACRO, DeclKind.INCLUDE)]

    def function_at(self, offset: int) -> Decl | None:
        """The function whose definition (with its `;`, when one follows) contains `offset`, if any."""
        i = bisect.bisect_right(self._starts, offset) - 1
        # the last function starting at or before `offset` is in its part or, when that part holds none, in the
        # part before (any earlier one ends before `offset`)
        for part in range(i, max(i - 2, -1), -1):
            before = [d for d in self._part(part) if d.kind in FUNCTION_KINDS and d.start <= offset]
            if before:
                return before[-1] if offset < before[-1].end else None
        return None

    def part_around(self, offset: int) -> tuple[int, int]:
        """The byte range of the top-level part that holds `offset` (the last to start at or before it)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return (self._parts[i].start_byte, self._parts[i].end_byte) if i >= 0 else (0, 0)

    def _part(self, i: int) -> list[Decl]:
        found = self._walked.get(i)
        if found is None:
            found = []
            _walk_item(self._parts, i, self._data, _Context(), found)
            self._walked[i] = found  # once whole: another thread may read the model meanwhile
        return found
