"""What every recipe shares: the draft it extends, the recipe interface, and the kernel it reads and rewrites.

A recipe reads one kernel of a parsed file (`KernelSource`), and either returns the draft extended with
its parameters (and the source rewritten so they are explicit) or raises RecipeRefused saying why not.
Run on a file it already rewrote, a recipe finds its parameters in the kernel's tuning struct and
returns them unchanged, so templatizing twice changes nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, NoReturn

from tree_sitter import Node

from cutune.cuda.launches import macro_trees
from cutune.cuda.model import Kernel, LaunchSite, SourceModel
from cutune.cuda.syntax import descendants, node_text, parse_tree
from cutune.errors import RecipeRefused, SourceError
from cutune.template.edits import EditList, apply_edits
from cutune.template.model import Binding, Refusal, TunableParam, Value
from cutune.template.tuning import (
    Member,
    find_struct,
    namespaces_at,
    qualifier,
    render_struct,
    tuning_name,
    value_text,
)

_WIDTH = 110  # the line length beyond which new template parameters go on their own lines


@dataclass(frozen=True)
class Draft:
    """The templatize state between recipes: the source so far, and the parameters found so far."""

    text: str
    params: tuple[TunableParam, ...] = ()
    constraints: tuple[str, ...] = ()
    refusals: tuple[Refusal, ...] = ()  # partial refusals of recipes that applied elsewhere
    block_threads: str | None = None  # the parameter that holds the threads per block, once known

    def param(self, name: str) -> TunableParam | None:
        """The parameter called `name`, if a recipe added it."""
        return next((p for p in self.params if p.name == name), None)

    def extend(
        self,
        *params: TunableParam,
        constraints: tuple[str, ...] = (),
        text: str | None = None,
        refusals: tuple[Refusal, ...] = (),
        block_threads: str | None = None,
    ) -> Draft:
        """A draft with parameters added (a same-named one is replaced in place), constraints and refusals
        appended."""
        new = {p.name: p for p in params}
        kept = tuple(new.pop(p.name, p) for p in self.params)
        return dataclasses.replace(
            self,
            block_threads=block_threads or self.block_threads,
            text=self.text if text is None else text,
            params=kept + tuple(new.values()),
            constraints=self.constraints + tuple(c for c in constraints if c not in self.constraints),
            refusals=self.refusals + refusals,
        )


class Recipe(ABC):
    """Makes one kind of hidden choice of a kernel an explicit parameter."""

    name: ClassVar[str]
    description: ClassVar[str]

    @abstractmethod
    def apply(self, model: SourceModel, kernel: Kernel, draft: Draft) -> Draft:
        """The draft with this recipe's parameters; raises RecipeRefused when it does not apply."""

    def refuse(self, reason: str) -> NoReturn:
        """Stop: this recipe does not apply, for `reason`."""
        raise RecipeRefused(self.name, reason)


class KernelSource:
    """One kernel of a parsed file, with the syntax tree recipes read it through."""

    def __init__(self, model: SourceModel, kernel: Kernel) -> None:
        self.model = model
        self.kernel = kernel
        self.data = model.text.encode("utf-8")
        self.root = parse_tree(self.data).root_node
        function = self.node_at(kernel.name_span.start_byte, "function_definition")
        body = function.child_by_field_name("body") if function is not None else None
        if function is None or body is None:
            raise SourceError(
                f"the definition of {kernel.name} could not be read",
                path=model.path,
                line=kernel.name_span.start.line,
            )
        self.function: Node = function
        self.body: Node = body
        self.struct = find_struct(self.root, self.data, kernel)
        self.struct_name = tuning_name(kernel.name)

    def text(self, node: Node) -> str:
        """The source text of a node."""
        return node_text(self.data, node)

    def field(self, node: Node, name: str) -> str:
        """The text of a node's child field, '' when it has none."""
        child = node.child_by_field_name(name)
        return node_text(self.data, child) if child is not None else ""

    def line(self, node_or_byte: Node | int) -> int:
        """The 1-based line of a node or byte offset."""
        at = node_or_byte if isinstance(node_or_byte, int) else node_or_byte.start_byte
        return self.data.count(b"\n", 0, at) + 1

    def node_at(self, byte: int, node_type: str) -> Node | None:
        """The innermost node of `node_type` that contains byte `byte`."""
        node: Node | None = self.root.descendant_for_byte_range(byte, byte)
        while node is not None and node.type != node_type:
            node = node.parent
        return node

    def body_indent(self) -> str:
        """The indent of the body's first statement (two spaces past the kernel's own where there is none)."""
        first = next((c for c in self.body.named_children if c.type != "comment"), None)
        if first is None:
            return _indent_of(self.data, self.kernel.span.start_byte) + "  "
        line_start = self.data.rfind(b"\n", 0, first.start_byte) + 1
        prefix = self.data[line_start : first.start_byte].decode("utf-8")
        return prefix if not prefix.strip() else "  "

    def in_body(self, *node_types: str) -> list[Node]:
        """The nodes of the given types inside the kernel's body, in source order."""
        return descendants(self.body, *node_types)

    def launches(self) -> list[tuple[LaunchSite, Node]]:
        """The kernel's launch sites in this file, each with its call expression node (for a launch inside a
        `#define`, a node of the macro body parsed on its own, at the same offsets)."""
        found = []
        macros: dict[str, Node] | None = None
        for site in self.model.launches_of(self.kernel.name):
            root: Node | None = self.root
            if site.macro is not None:
                macros = macros if macros is not None else {n: r for r, n in macro_trees(self.root, self.data)}
                root = macros.get(site.macro)
            if root is None:
                continue
            call = root.descendant_for_byte_range(site.span.start_byte, site.span.end_byte)
            while call is not None and call.type != "call_expression":
                call = call.parent
            if call is not None:
                found.append((site, call))
        return found

    @functools.cached_property
    def all_calls(self) -> tuple[Node, ...]:
        """Every call expression of the file, those in the bodies of `#define`s that launch kernels included."""
        roots = [self.root, *(r for r, _ in macro_trees(self.root, self.data))]
        return tuple(c for root in roots for c in descendants(root, "call_expression"))

    def macro_use(self, macro: str) -> int | None:
        """The byte offset of the first use of a `#define` inside a function of this file, if any."""
        for m in re.finditer(rb"\b" + re.escape(macro.encode()) + rb"\b", self.data):
            if self.node_at(m.start(), "function_definition") is not None:
                return m.start()
        return None

    def ref(self, name: str, at: int) -> str:
        """How code at byte `at` names member `name` of the tuning struct."""
        node = self.root.descendant_for_byte_range(at, at)
        prefix = qualifier(self.kernel.namespace, namespaces_at(node)) if node is not None else ""
        return f"{prefix}{self.struct_name}::{name}"

    def member_comment(self, name: str, fallback: str) -> str:
        """The comment of a struct member, or `fallback` when it has none."""
        member = self.struct.member(name) if self.struct is not None else None
        return member.comment if member is not None and member.comment else fallback

    def member_int(self, name: str) -> int | None:
        """The current value of an integer struct member, if the struct has it."""
        value = self.member_value(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def member_value(self, name: str) -> Value | None:
        """The current value of a struct member (int or bool), if the struct has it."""
        member = self.struct.member(name) if self.struct is not None else None
        if member is None:
            return None
        if member.value in ("true", "false"):
            return member.value == "true"
        try:
            return int(member.value, 0)
        except ValueError:
            return None

    def template_param(self, name: str) -> bool:
        """Whether the kernel has a template parameter called `name`."""
        return any(tp.name == name for tp in self.kernel.template_params)

    def binding_of(self, name: str) -> Binding:
        """TEMPLATE when the kernel takes `name` as a template parameter, else LAUNCH (host code only)."""
        return Binding.TEMPLATE if self.template_param(name) else Binding.LAUNCH

    def taken(self, name: str) -> bool:
        """Whether `name` is already a template parameter or a tuning-struct member."""
        return self.template_param(name) or (self.struct is not None and self.struct.member(name) is not None)


class KernelRewrite:
    """The edits one recipe makes to a kernel's file, applied together: plain replacements, new
    tuning-struct members and new template parameters of the kernel."""

    def __init__(self, src: KernelSource, recipe: str) -> None:
        self.src = src
        self.recipe = recipe
        self._edits = EditList(src.data)
        self._members: list[Member] = []
        self._template_params: list[str] = []

    def replace(self, start: int, end: int, new_text: str) -> None:
        """Replace bytes [start, end)."""
        self._edits.replace(start, end, new_text)

    def replace_node(self, node: Node, new_text: str) -> None:
        """Replace a node's text."""
        self._edits.replace(node.start_byte, node.end_byte, new_text)

    def insert(self, at: int, new_text: str) -> None:
        """Insert text at byte `at`."""
        self._edits.insert(at, new_text)

    def member(self, name: str, value: Value, comment: str, *, in_kernel: bool, type_: str = "int") -> None:
        """A new struct member; `in_kernel` also makes it a template parameter defaulting to the member."""
        self._members.append(Member(name, type_, value_text(value), comment))
        if in_kernel:
            self._template_params.append(f"{type_} {name} = {self.src.struct_name}::{name}")

    def template_param(self, declaration: str) -> None:
        """A new template parameter of the kernel, e.g. `int HEAD_SIZE_CT = 0`."""
        self._template_params.append(declaration)

    def result(self) -> str:
        """The rewritten file."""
        src = self.src
        if self._members:
            if src.struct is not None:
                members = (*src.struct.members, *self._members)
                self.replace(
                    src.struct.start,
                    src.struct.end,
                    render_struct(src.kernel.name, members, src.struct.indent),
                )
            else:
                at = self._struct_position()
                indent = _indent_of(src.data, at)
                self.insert(
                    at,
                    render_struct(src.kernel.name, self._members, indent).removeprefix(indent) + "\n\n" + indent,
                )
        if self._template_params:
            if src.kernel.extern_c:
                raise RecipeRefused(self.recipe, 'an extern "C" kernel cannot take template parameters')
            if src.kernel.template_span is not None:
                opening, close = src.kernel.template_span.start_byte, src.kernel.template_span.end_byte - 1
                self.insert(close, self._wrapped(opening, close))
            else:
                at = src.kernel.span.start_byte
                self.insert(at, f"template <{', '.join(self._template_params)}>\n{_indent_of(src.data, at)}")
        return apply_edits(src.model.text, self._edits.edits)

    def _wrapped(self, opening: int, close: int) -> str:
        """`, NEW, ...` to insert before the `>` of `<...>` at [opening, close], wrapping past the width."""
        data = self.src.data
        line_start = data.rfind(b"\n", 0, close) + 1
        pad = " " * len(data[data.rfind(b"\n", 0, opening) + 1 : opening + 1].decode())
        width = len(data[line_start:close].decode()) + 1  # with the closing `>`
        out = ""
        for p in self._template_params:
            if width + len(p) + 2 > _WIDTH:
                out += f",\n{pad}{p}"
                width = len(pad) + len(p) + 1
            else:
                out += f", {p}"
                width += len(p) + 2
        return out

    def _struct_position(self) -> int:
        """Where a new struct goes: before the kernel and the comment lines right above it."""
        data = self.src.data
        at = self.src.kernel.span.start_byte
        line_start = data.rfind(b"\n", 0, at) + 1
        if data[line_start:at].strip():
            return at  # something precedes the kernel on its line: insert right before the kernel
        while line_start > 0:
            previous = data.rfind(b"\n", 0, line_start - 1) + 1
            if not data[previous : line_start - 1].strip().startswith(b"//"):
                break
            line_start = previous
        return line_start + len(_indent_of(data, line_start))


def _indent_of(data: bytes, at: int) -> str:
    """The leading whitespace of the line containing byte `at`."""
    start = data.rfind(b"\n", 0, at) + 1
    end = start
    while end < len(data) and data[end] in b" \t":
        end += 1
    return data[start:end].decode("utf-8")
