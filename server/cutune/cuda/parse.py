"""`.cu` text → SourceModel, with tree-sitter-cuda; tolerant of any input, never raises on bad code."""

from __future__ import annotations

import contextlib
import functools
import gc
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from tree_sitter import Node, Tree

from cutune.cuda.decls import Decl, Declarations, DeclKind, collect_decls
from cutune.cuda.launches import Launch, find_launches, launch_at
from cutune.cuda.literals import find_literals
from cutune.cuda.model import (
    DeviceFunction,
    Include,
    Kernel,
    LaunchBounds,
    LaunchExtent,
    LaunchSite,
    Macro,
    Parameter,
    ParseIssue,
    SourceModel,
    TemplateParam,
    TemplateParamKind,
    TunableLiteral,
    TypeDecl,
)
from cutune.cuda.syntax import check_stop, declarator_name, node_text, parse_tree, split_arguments, trim
from cutune.cuda.text import LineIndex, line_index

_TRAILING_COMMENT = re.compile(r"\s*(?://.*|/\*.*?\*/\s*)$", re.S)
_T = TypeVar("_T")
_P = ParamSpec("_P")
_I = TypeVar("_I")


def parse_source(text: str, path: str | None = None, *, rewrite: bool = False) -> SourceModel:
    """The source model of a CUDA text: kernels, device functions, types, launches, tunable literals.

    A text modelled recently under the same path gives the same (immutable) model again: templatize, the
    spec drafter and the variant proposals each ask for the model of the same rewritten text. A `rewrite` of
    the file (templatize's drafts) is parsed incrementally from the last rewrite, not from the file's own last
    text, so the editor's next parse of the file still starts from the version it edited. Inside
    `syntax.stoppable`, parsing and the model's builders raise ParseStopped once it is no longer wanted."""
    with _MODELS_LOCK:
        cached = _MODELS.get((path, text))
        if cached is not None:
            _MODELS.move_to_end((path, text))
            return cached
    model = _model(text, path, rewrite)
    with _MODELS_LOCK:
        _MODELS[(path, text)] = model
        while len(_MODELS) > _CACHED_MODELS:
            _MODELS.popitem(last=False)
    return model


_CACHED_MODELS = 4
_MODELS: OrderedDict[tuple[str | None, str], SourceModel] = OrderedDict()
_MODELS_LOCK = threading.Lock()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a model is built: the build allocates hundreds of thousands of
    small acyclic objects, and the collections they trigger took a third of a 50,000-line file's build."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _model(text: str, path: str | None, rewrite: bool = False) -> SourceModel:
    data = text.encode("utf-8", errors="replace")
    key = f"{path}\0rewrite" if rewrite and path is not None else path
    return SourceModel(path=path, text=text, facts=_Facts(data, parse_tree(data, key=key)))


def _paused(build: Callable[_P, _T]) -> Callable[_P, _T]:
    """A build step run with the cycle collector paused (see `collector_paused`)."""

    @functools.wraps(build)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        with collector_paused():
            return build(*args, **kwargs)

    return run


class _Facts:
    """The source model's parts for one parsed text, each built on first use and kept."""

    def __init__(self, data: bytes, tree: Tree) -> None:
        self._data = data
        self._tree = tree  # keeps the nodes below valid
        self._root = tree.root_node
        self._by_kernel: dict[str, list[Launch]] = {}  # one kernel's launches, where not all were built
        self._within: dict[tuple[int, int], list[Launch]] = {}  # the launches written in a byte range

    @functools.cached_property
    def _index(self) -> LineIndex:
        return line_index(self._data)

    @functools.cached_property
    def _declarations(self) -> Declarations:
        return Declarations(self._root, self._data)

    @functools.cached_property
    @_paused
    def _decls(self) -> list[Decl]:
        return self._declarations.all

    @_paused
    def _decls_holding(self, text: str) -> list[Decl]:
        return self._declarations.holding(text)

    @functools.cached_property
    @_paused
    def _directives(self) -> list[Decl]:
        return self._declarations.directives

    @functools.cached_property
    def _errors(self) -> list[tuple[Node, str]]:
        return _error_nodes(self._root)

    @functools.cached_property
    def _error_ranges(self) -> list[tuple[int, int]]:
        return [(n.start_byte, max(n.end_byte, n.start_byte + 1)) for n, _ in self._errors]

    @functools.cached_property
    def _parts(self) -> list[_KernelParts]:
        return _kernel_parts(self._decls, self._errors)

    @functools.cached_property
    @_paused
    def _kernels(self) -> tuple[Kernel, ...]:
        return tuple(
            k for p in _stoppable(self._parts) if (k := _kernel(p, self._data, self._index, self._error_ranges))
        )

    @functools.cached_property
    @_paused
    def _launches(self) -> list[Launch]:
        return find_launches(self._root, self._data, self._index, self._declarations)

    def kernels(self) -> tuple[Kernel, ...]:
        return self._kernels

    def kernel(self, name: str) -> Kernel | None:
        """The first kernel called `name`, built alone (the others are not)."""
        return next(self._named(name), None)

    def _named(self, name: str) -> Iterator[Kernel]:
        """The kernels called `name`, in source order."""
        if "_kernels" in self.__dict__:
            yield from (k for k in self._kernels if k.name == name)
            return
        # only the definitions that declare `name` (a definition's declared name is its kernel's name), and
        # those recovered from error regions
        encoded = name.encode()
        # the declarations in the parts of the file that name it (a few, of thousands of definitions)
        for p in _kernel_parts([d for d in self._decls_holding(name) if d.name == name], self._errors):
            found = declarator_name(p.declarator.child_by_field_name("declarator"))
            if found is not None and self._data[found.start_byte : found.end_byte] == encoded:
                kernel = _kernel(p, self._data, self._index, self._error_ranges)
                if kernel is not None:
                    yield kernel

    def launches(self, kernel: str | None = None) -> tuple[LaunchSite, ...]:
        if kernel is not None and "_launches" not in self.__dict__:  # one kernel's, without building the others
            return tuple(lc.site for lc in self._kernel_launches(kernel))
        return tuple(lc.site for lc in self._launches if kernel is None or lc.kernel == kernel)

    @_paused
    def _kernel_launches(self, kernel: str) -> list[Launch]:
        found = self._by_kernel.get(kernel)
        if found is None:
            found = self._by_kernel[kernel] = find_launches(
                self._root, self._data, self._index, self._declarations, kernel
            )
        return found

    def launch_configs(self) -> tuple[tuple[int, int, int], ...]:
        data = self._data
        return tuple(
            (*trim(data, c.start_byte, c.end_byte), slot) for lc in self._launches for slot, c in enumerate(lc.config)
        )

    def launch_extents(self) -> tuple[LaunchExtent, ...]:
        return tuple(
            LaunchExtent(c.start_byte, c.end_byte, c.start_point.row, c.end_point.row, lc.kernel)
            for lc in _stoppable(self._launches)
            if (c := lc.call)
        )

    @_paused
    def literals(self, kernel: str | None = None) -> tuple[TunableLiteral, ...]:
        kernels = self._kernels if kernel is None else tuple(self._named(kernel))
        if kernel is None or "_launches" in self.__dict__:
            launches = self._launches
            at: Callable[[int], Launch | None] = functools.partial(launch_at, launches)
        else:  # the kernel's launches and the others in their functions (the literals they may share), not the file's
            own = self._kernel_launches(kernel)
            hosts = dict.fromkeys((lc.function.start, lc.function.end) for lc in own if lc.function is not None)
            launches = own + [lc for host in hosts for lc in self._launches_within(host) if lc.kernel != kernel]
            at = self._launch_at
        found = find_literals(self._root, self._data, self._index, kernels, launches, at, self._declarations, kernel)
        return tuple(found)

    def _launches_within(self, span: tuple[int, int]) -> list[Launch]:
        found = self._within.get(span)
        if found is None:
            found = self._within[span] = find_launches(
                self._root, self._data, self._index, self._declarations, within=span
            )
        return found

    def _launch_at(self, offset: int) -> Launch | None:
        """The launch whose call holds `offset` (see `launch_at`), from the launches of the top-level part it is in."""
        return launch_at(self._launches_within(self._declarations.part_around(offset)), offset)

    @_paused
    def device_functions(self) -> tuple[DeviceFunction, ...]:
        return tuple(
            DeviceFunction(d.name, self._index.span(d.start, d.end), "::".join(d.namespace))
            for d in self._decls_holding("__device__")  # a device function is written with the keyword
            if d.kind is DeclKind.DEVICE_FUNCTION and d.name
        )

    def macros(self) -> tuple[Macro, ...]:
        data, index = self._data, self._index
        return tuple(_macro(d, data, index) for d in self._directives if d.kind is DeclKind.MACRO and d.name)

    def types(self) -> tuple[TypeDecl, ...]:
        return tuple(
            TypeDecl(d.name, self._index.span(d.start, d.end), "::".join(d.namespace))
            for d in self._decls
            if d.kind is DeclKind.TYPE and d.name
        )

    def includes(self) -> tuple[Include, ...]:
        data, index = self._data, self._index
        return tuple(i for d in self._directives if d.kind is DeclKind.INCLUDE and (i := _include(d, data, index)))

    def issues(self) -> tuple[ParseIssue, ...]:
        return tuple(ParseIssue(message, self._index.span(n.start_byte, n.end_byte)) for n, message in self._errors)


@dataclass(frozen=True)
class Outline:
    """Where a text's kernels start and which types it declares: the source model's first lines, cheaply."""

    kernels: tuple[tuple[str, int], ...]  # (name, zero-based line of the definition's first line)
    types: frozenset[str]  # the types declared at file or namespace scope


def outline(text: str, path: str | None = None) -> Outline:
    """The kernels and type names `parse_source` would find, without the rest of its model (a first look at a
    large file). Parsed under `path`: a `parse_source` of the same text then re-uses the tree, and an
    edited text is re-parsed incrementally."""
    data = text.encode("utf-8", errors="replace")
    root = parse_tree(data, key=path).root_node
    decls = collect_decls(root, data)
    kernels, line, counted = [], 0, 0
    for p in _kernel_parts(decls, _error_nodes(root)):
        name = declarator_name(p.declarator.child_by_field_name("declarator"))
        if name is not None:
            line += data.count(b"\n", counted, p.start)
            counted = p.start
            kernels.append((node_text(data, name), line))
    return Outline(tuple(kernels), frozenset(d.name for d in decls if d.kind is DeclKind.TYPE and d.name))


def _stoppable(items: Sequence[_I], every: int = 64) -> Iterator[_I]:
    """`items`, asking the enclosing `stoppable` block every `every` items whether they are still wanted (the
    kernels of a 100,000-line file take half a second to build)."""
    for i, item in enumerate(items):
        if i % every == 0:
            check_stop()
        yield item


def _kernel_parts(decls: list[Decl], errors: list[tuple[Node, str]]) -> list[_KernelParts]:
    """The kernels' pieces, in source order: clean definitions, and those recovered from error regions."""
    parts = [p for d in decls if d.kind is DeclKind.KERNEL and (p := _definition_parts(d))]
    parts += [p for n, _ in errors if n.is_error for p in _recovered_parts(n)]
    return sorted(parts, key=lambda p: p.start)


def _error_nodes(root: Node) -> list[tuple[Node, str]]:
    """The outermost ERROR and MISSING nodes, except those inside `__launch_bounds__` (recovered)."""
    found: list[tuple[Node, str]] = []
    stack = [root] if root.has_error else []
    while stack:
        node = stack.pop()
        if node.is_missing:
            found.append((node, f"missing `{node.type}`"))
        elif node.is_error:
            if node.parent is None or node.parent.type != "launch_bounds":
                found.append((node, "syntax error: tree-sitter-cuda could not parse this region"))
        else:
            stack.extend(c for c in node.children if c.has_error or c.is_missing)
    found.sort(key=lambda e: e[0].start_byte)
    return found


@dataclass(frozen=True, slots=True)
class _KernelParts:
    """Where a kernel's pieces are, from a clean definition or recovered from an error region."""

    start: int
    end: int
    declarator: Node  # the function_declarator
    body: tuple[int, int]
    template_list: Node | None
    launch_bounds: Node | None
    extern_c: bool = False
    namespace: str = ""


def _definition_parts(d: Decl) -> _KernelParts | None:
    func = d.item
    declarator = func.child_by_field_name("declarator")
    while declarator is not None and declarator.type != "function_declarator":
        declarator = declarator.child_by_field_name("declarator")
    body = func.child_by_field_name("body")
    if declarator is None or body is None:
        return None
    return _KernelParts(
        start=d.start,
        end=func.end_byte,
        declarator=declarator,
        body=(body.start_byte, body.end_byte),
        template_list=d.node.child_by_field_name("parameters") if d.node.type == "template_declaration" else None,
        launch_bounds=next((c for c in func.children if c.type == "launch_bounds"), None),
        extern_c=d.extern_c or d.in_extern_c_block,
        namespace="::".join(d.namespace),
    )


def _recovered_parts(error: Node) -> list[_KernelParts]:
    """Kernels whose definition tree-sitter flattened into an ERROR node (e.g. an unclosed brace at the
    end of the file): `[template <...>] __global__ ... name(params) {` with the body running to the
    end of the region."""
    found: list[_KernelParts] = []
    children = error.children
    template_list: Node | None = None
    start: int | None = None
    bounds: Node | None = None
    declarator: Node | None = None
    for i, c in enumerate(children):
        if c.type == "template_parameter_list" and i > 0 and children[i - 1].type == "template":
            template_list = c
        elif c.type == "__global__":
            # the definition starts at its `template` keyword when one came just before
            start = (
                template_list.prev_sibling.start_byte if template_list and template_list.prev_sibling else c.start_byte
            )
            bounds, declarator = None, None
        elif start is not None and c.type == "launch_bounds":
            bounds = c
        elif start is not None and c.type == "function_declarator":
            declarator = c
        elif start is not None and declarator is not None and c.type == "{":
            found.append(
                _KernelParts(start, error.end_byte, declarator, (c.start_byte, error.end_byte), template_list, bounds)
            )
            start, template_list, declarator = None, None, None
        elif c.type in (";", "}"):
            start, template_list, declarator = None, None, None
    return found


def _kernel(parts: _KernelParts, data: bytes, index: LineIndex, error_ranges: list[tuple[int, int]]) -> Kernel | None:
    name = declarator_name(parts.declarator.child_by_field_name("declarator"))
    if name is None:
        return None
    params_node = parts.declarator.child_by_field_name("parameters")
    template_list = parts.template_list
    return Kernel(
        name=node_text(data, name),
        params=tuple(_parameter(p, data, index) for p in _items(params_node)),
        template_params=tuple(tp for p in _items(template_list) if (tp := _template_param(p, data, index))),
        launch_bounds=_launch_bounds(parts.launch_bounds, data, index),
        span=index.span(parts.start, parts.end),
        name_span=index.span(name.start_byte, name.end_byte),
        body_span=index.span(*parts.body),
        template_span=index.span(template_list.start_byte, template_list.end_byte) if template_list else None,
        extern_c=parts.extern_c,
        has_errors=any(s < parts.end and e > parts.start for s, e in error_ranges),
        namespace=parts.namespace,
    )


def _items(node: Node | None) -> list[Node]:
    return [c for c in node.named_children if c.type not in ("comment", "ERROR")] if node is not None else []


def _type_text(data: bytes, p: Node, name: Node | None) -> str:
    """A parameter's declared type: its text without the name and `= default`, whitespace normalized."""
    cut = [(name.start_byte, name.end_byte)] if name is not None else []
    equals = next((c for c in p.children if c.type == "="), None)
    if equals is not None:
        cut.append((equals.start_byte, p.end_byte))
    pieces: list[bytes] = []
    pos = p.start_byte
    for start, end in sorted(cut):
        pieces.append(data[pos:start])
        pos = max(pos, end)
    pieces.append(data[pos : p.end_byte])
    return " ".join(b"".join(pieces).decode("utf-8", errors="replace").split())


def _parameter(p: Node, data: bytes, index: LineIndex) -> Parameter:
    name = declarator_name(p.child_by_field_name("declarator"))
    return Parameter(
        name=node_text(data, name) if name is not None else "",
        type=_type_text(data, p, name),
        span=index.span(p.start_byte, p.end_byte),
    )


def _template_param(p: Node, data: bytes, index: LineIndex) -> TemplateParam | None:
    span = index.span(p.start_byte, p.end_byte)
    t = p.type
    if t in (
        "type_parameter_declaration",
        "variadic_type_parameter_declaration",
        "optional_type_parameter_declaration",
        "template_template_parameter_declaration",
    ):
        name = p.child_by_field_name("name")
        if name is None:
            idents = [c for c in p.named_children if c.type == "type_identifier"]
            name = idents[-1] if idents else None
        default = p.child_by_field_name("default_type")
        return TemplateParam(
            TemplateParamKind.TYPE,
            node_text(data, name) if name is not None else "",
            "",
            node_text(data, default).strip() if default is not None else None,
            span,
        )
    if t in ("parameter_declaration", "optional_parameter_declaration", "variadic_parameter_declaration"):
        name = declarator_name(p.child_by_field_name("declarator"))
        default = p.child_by_field_name("default_value")
        return TemplateParam(
            TemplateParamKind.VALUE,
            node_text(data, name) if name is not None else "",
            _type_text(data, p, name),
            node_text(data, default).strip() if default is not None else None,
            span,
        )
    return None


def _launch_bounds(node: Node | None, data: bytes, index: LineIndex) -> LaunchBounds | None:
    """`__launch_bounds__(...)` with 1–3 arguments, read from the text (the grammar knows only 2)."""
    if node is None:
        return None
    args = [
        data[s:e].decode("utf-8", errors="replace") for s, e in split_arguments(data, node.start_byte, node.end_byte)
    ]
    if not args:
        return None
    return LaunchBounds(
        max_threads=args[0],
        min_blocks=args[1] if len(args) > 1 else None,
        max_cluster=args[2] if len(args) > 2 else None,
        span=index.span(node.start_byte, node.end_byte),
    )


def _macro(d: Decl, data: bytes, index: LineIndex) -> Macro:
    value = d.item.child_by_field_name("value")
    text = node_text(data, value) if value is not None else ""
    return Macro(d.name, _TRAILING_COMMENT.sub("", text).strip(), index.span(*trim(data, d.start, d.end)))


def _include(d: Decl, data: bytes, index: LineIndex) -> Include | None:
    target = d.item.child_by_field_name("path")
    if target is None:
        return None
    raw = node_text(data, target).strip()
    system = raw.startswith("<")
    return Include(raw.strip('<>"'), system, index.span(*trim(data, d.start, d.end)))


# whitespace and whole comments; a backslash (a continued line, a continued `//` comment) is left out
_TRIVIA = re.compile(rb"(?:[ \t\r\n\f\v]|//[^\n\\]*|/\*(?:[^*\\]|\*(?!/))*\*/)*")
_IN_COMMENT = re.compile(rb"[^\n*/\\]*")  # text that cannot end the comment it is typed in, or start another
_CONDITIONAL = frozenset(("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef"))


def only_trivia(model: SourceModel, removed: bytes, start: int, new_end: int) -> bool:
    """Whether an edit that replaced `removed` by the model's bytes [start, new_end) changed only whitespace and
    comments outside any directive: then the old text's tokens are the model's, moved. False when unsure (a
    text with syntax errors, a string or directive line edited, a comment merged with code)."""
    facts = model.facts
    if not isinstance(facts, _Facts) or facts._root.has_error:
        return False
    inserted = facts._data[start:new_end]
    node = facts._root.descendant_for_byte_range(start, new_end)
    if node is None:
        return False
    if node.type == "comment" and (node.start_byte, node.end_byte) != (start, new_end):  # typed in a comment
        return bool(_IN_COMMENT.fullmatch(removed) and _IN_COMMENT.fullmatch(inserted)) and _outside_directives(node)
    if not (_TRIVIA.fullmatch(removed) and _TRIVIA.fullmatch(inserted)):
        return False
    if node.child_count == 0:  # a token: the whole of an inserted comment, else the edit is inside it
        return node.type == "comment" and _outside_directives(node)
    child = node.first_child_for_byte(start)
    while child is not None and child.start_byte < new_end:
        if child.start_byte < start or child.end_byte > new_end or child.type != "comment":
            return False  # a token across the edit's bounds, or one inside it
        child = child.next_sibling
    return _outside_directives(node)


def _outside_directives(node: Node) -> bool:
    """Whether a node is in no directive, except in the body of an `#if`/`#ifdef` branch."""
    at = node.start_byte
    up: Node | None = node
    while up is not None:
        if up.type.startswith("preproc"):
            head = up.child_by_field_name("condition") or up.child_by_field_name("name")
            if up.type not in _CONDITIONAL or (head is not None and head.end_byte >= at):
                return False
        up = up.parent
    return True
