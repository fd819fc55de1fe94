"""The `<kernel>_tuning` struct: where a templatized kernel's parameters live, with their current values.

Templatize writes it right before the kernel; its members are the defaults of the kernel's new template
parameters and the values host code launches with, so editing a member (or `apply_config`) retunes the
kernel and its launches together.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.model import Kernel
from cutune.cuda.syntax import node_text
from cutune.template.model import Value

HEADER = "// cutune: tunable parameters of {kernel} (defaults are the original choices; `cutune tune` searches them)"


def tuning_name(kernel: str) -> str:
    """The name of a kernel's tuning struct."""
    return f"{kernel}_tuning"


def value_text(value: Value) -> str:
    """A parameter value as C++ source."""
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True, slots=True)
class Member:
    """One `static constexpr TYPE NAME = VALUE;  // COMMENT` line of the struct."""

    name: str
    type: str
    value: str
    comment: str = ""


@dataclass(frozen=True)
class TuningStruct:
    """A kernel's tuning struct as found in the source: its byte range and members."""

    kernel: str
    start: int  # the header comment when present, else `struct`
    end: int  # just past the closing `};`
    indent: str
    members: tuple[Member, ...]
    value_ranges: dict[str, tuple[int, int]]  # member name → byte range of its value

    def member(self, name: str) -> Member | None:
        """The member called `name`, if any."""
        return next((m for m in self.members if m.name == name), None)


_WORD = re.compile(rb"\w")


def find_struct(root: Node, data: bytes, kernel: Kernel) -> TuningStruct | None:
    """The tuning struct of `kernel` (in the kernel's namespace), if the file has one."""
    wanted = tuning_name(kernel.name).encode()
    # the struct's name anchors the search: a query over a 50,000-line file's whole tree takes 100 ms, and even a
    # regular expression's scan of it 13 ms (a transform reads the struct of every rewrite it makes)
    at = data.find(wanted)
    while at >= 0:
        end = at + len(wanted)
        bounded = (at == 0 or not _WORD.match(data, at - 1)) and not _WORD.match(data, end)
        name = root.descendant_for_byte_range(at, end) if bounded else None
        at = data.find(wanted, end)
        if name is None:
            continue
        struct = name.parent
        body = struct.child_by_field_name("body") if struct is not None else None
        if (
            struct is not None
            and struct.type == "struct_specifier"
            and name.type == "type_identifier"
            and struct.child_by_field_name("name") == name
            and body is not None
            and body.type == "field_declaration_list"
            and "::".join(namespaces_at(struct)) == kernel.namespace
        ):
            return _read(kernel.name, struct, body, data)
    return None


def _read(kernel: str, struct: Node, body: Node, data: bytes) -> TuningStruct:
    members: list[Member] = []
    ranges: dict[str, tuple[int, int]] = {}
    fields = [c for c in body.named_children if c.type == "field_declaration"]
    for f in fields:
        name = f.child_by_field_name("declarator")
        value = f.child_by_field_name("default_value")
        type_node = f.child_by_field_name("type")
        if name is None or value is None or type_node is None:
            continue
        comment = f.next_named_sibling
        same_line = comment is not None and comment.type == "comment" and comment.start_point[0] == f.end_point[0]
        note = node_text(data, comment).removeprefix("//").strip() if same_line and comment else ""
        members.append(Member(node_text(data, name), node_text(data, type_node), node_text(data, value), note))
        ranges[node_text(data, name)] = (value.start_byte, value.end_byte)
    start = struct.start_byte
    previous = struct.prev_sibling
    if previous is not None and previous.type == "comment" and node_text(data, previous).startswith("// cutune:"):
        start = previous.start_byte
    end = struct.end_byte
    semicolon = struct.next_sibling
    if semicolon is not None and semicolon.type == ";":
        end = semicolon.end_byte
    line_start = data.rfind(b"\n", 0, start) + 1
    indent = data[line_start:start].decode("utf-8", errors="replace")
    return TuningStruct(kernel, start, end, "" if indent.strip() else indent, tuple(members), ranges)


def render_struct(kernel: str, members: Sequence[Member], indent: str = "") -> str:
    """The struct's source text (header comment through `};`, no trailing newline), comments aligned."""
    decls = [f"static constexpr {m.type} {m.name} = {m.value};" for m in members]
    width = max((len(d) for d, m in zip(decls, members, strict=True) if m.comment), default=0)
    lines = [indent + HEADER.format(kernel=kernel), f"{indent}struct {tuning_name(kernel)} {{"]
    for d, m in zip(decls, members, strict=True):
        lines.append(f"{indent}  {d.ljust(width)}  // {m.comment}" if m.comment else f"{indent}  {d}")
    lines.append(f"{indent}}};")
    return "\n".join(lines)


def namespaces_at(node: Node) -> tuple[str, ...]:
    """The names of the namespaces enclosing a node, outermost first ('' for an anonymous one)."""
    names: list[str] = []
    parent = node.parent
    while parent is not None:
        if parent.type == "namespace_definition":
            name = parent.child_by_field_name("name")
            text = name.text.decode("utf-8", errors="replace") if name is not None and name.text else ""
            names[:0] = [n.strip() for n in text.split("::")] if text else [""]
        parent = parent.parent
    return tuple(names)


def qualifier(kernel_namespace: str, site_namespaces: Sequence[str]) -> str:
    """The prefix code in `site_namespaces` needs to name something in `kernel_namespace`."""
    target = kernel_namespace.split("::") if kernel_namespace else []
    common = 0
    while common < min(len(target), len(site_namespaces)) and target[common] == site_namespaces[common]:
        common += 1
    # an anonymous namespace cannot be named, and need not be: its members are visible outside it
    return "".join(f"{n}::" for n in target[common:] if n)
