"""How a kernel uses each pointer argument: read, written, or both, from its body and the device functions
of the file it passes the pointer to (an in-place kernel reads and writes the same array)."""

from __future__ import annotations

import re

from tree_sitter import Node

from cutune.cuda.model import Access, Kernel, SourceModel
from cutune.cuda.syntax import declarator_name, descendants, node_text, parse_tree

_STORE = re.compile(r"(?i)store|write|scatter")
_LOAD = re.compile(r"(?i)load|read|gather|__ldg")
_ATOMIC = re.compile(r"^atomic")
_MAX_DEPTH = 4
_INTEGER = re.compile(r"\b(?:u?int(?:8|16|32|64)?_t|int|long|short|unsigned|size_t|uint)\b")
CASTS = frozenset(("reinterpret_cast", "static_cast", "const_cast"))  # the C++ casts, parsed as calls
_ELEMENT_WRAPPERS = frozenset(("field_expression", "parenthesized_expression", "subscript_expression"))


def pointer_access(model: SourceModel, kernel: Kernel) -> dict[str, Access]:
    """Each pointer parameter of `kernel` → how the kernel (and the device functions it calls) use it."""
    data = model.text.encode("utf-8", errors="replace")
    root = parse_tree(data).root_node
    reader = _Reader(model, data, root)
    node = root.descendant_for_byte_range(kernel.body_span.start_byte, kernel.body_span.end_byte)
    if node is None:
        return {}
    pointers = [p.name for p in kernel.params if "*" in p.type and p.name]
    return {name: reader.access(node, name, 0) for name in pointers}


def pointer_roles(model: SourceModel, kernel: Kernel) -> dict[str, str]:
    """Each pointer parameter the kernel touches → "in" (read only), "out" (written only) or "inout"."""
    names = {Access.READ: "in", Access.WRITE: "out", Access.READ | Access.WRITE: "inout"}
    return {p: names[a] for p, a in pointer_access(model, kernel).items() if a in names}


def index_arrays(model: SourceModel, kernel: Kernel) -> dict[str, frozenset[str]]:
    """Integer pointer parameters whose elements index other pointer parameters → those arrays: a slot
    mapping (`cache[slot_mapping[t] * n + i]`, also through a local `const int64_t slot = slot_mapping[t];`)
    or a gather index. Such an array wants distinct, in-range values (a permutation), and an array written
    through it keeps the rows no index names (so it is read too)."""
    data = model.text.encode("utf-8", errors="replace")
    root = parse_tree(data).root_node
    reader = _Reader(model, data, root)
    body = root.descendant_for_byte_range(kernel.body_span.start_byte, kernel.body_span.end_byte)
    if body is None:
        return {}
    pointers = {p.name: reader._aliases(body, p.name) for p in kernel.params if "*" in p.type and p.name}
    owner = {alias: name for name, aliases in pointers.items() for alias in aliases}
    found: dict[str, frozenset[str]] = {}
    for p in kernel.params:
        if p.name not in pointers or not _INTEGER.search(p.type.split("*")[0]):
            continue
        elements = [
            s
            for s in descendants(body, "subscript_expression")
            if (a := s.child_by_field_name("argument")) is not None and reader.text(a) in pointers[p.name]
        ]
        carriers = _carriers(body, elements, reader)
        uses = elements + [i for i in descendants(body, "identifier") if reader.text(i) in carriers]
        targets = {t for use in uses if (t := _indexed_by(use, reader, owner)) is not None and t != p.name}
        if targets:
            found[p.name] = frozenset(targets)
    return found


def _carriers(body: Node, elements: list[Node], reader: _Reader) -> set[str]:
    """The locals computed from the elements, transitively (`slot = p[t]; row = slot / block_size;`)."""
    starts = {e.start_byte for e in elements}
    names: set[str] = set()
    grew = True
    while grew:
        grew = False
        for d in descendants(body, "init_declarator"):
            value, ident = d.child_by_field_name("value"), declarator_name(d.child_by_field_name("declarator"))
            if value is None or ident is None or reader.text(ident) in names:
                continue
            inner = descendants(value, "subscript_expression") + _identifiers(value)
            if any(n.start_byte in starts and n.type == "subscript_expression" for n in inner) or any(
                n.type == "identifier" and reader.text(n) in names for n in inner
            ):
                names.add(reader.text(ident))
                grew = True
    return names


def _indexed_by(use: Node, reader: _Reader, owner: dict[str, str]) -> str | None:
    """The pointer parameter a value indexes: inside the subscript of `q[...]`, or added to `q`."""
    node, parent = use, use.parent
    while parent is not None and parent.type not in ("expression_statement", "declaration", "compound_statement"):
        if parent.type == "subscript_argument_list" and parent.parent is not None:
            target = parent.parent.child_by_field_name("argument")
            return owner.get(reader.text(target)) if target is not None else None
        if parent.type == "binary_expression" and parent.child_by_field_name("operator") is not None:
            other = [c for c in parent.named_children if c != node]
            named = [owner[reader.text(o)] for o in other if o.type == "identifier" and reader.text(o) in owner]
            if named and parent.child_by_field_name("operator").type == "+":  # type: ignore[union-attr]
                return named[0]
        node, parent = parent, parent.parent
    return None


class _Reader:
    def __init__(self, model: SourceModel, data: bytes, root: Node) -> None:
        self.model = model
        self.data = data
        self.root = root

    def text(self, node: Node) -> str:
        return node_text(self.data, node)

    def access(self, body: Node, name: str, depth: int) -> Access:
        names = self._aliases(body, name)
        found = Access.NONE
        for ident in descendants(body, "identifier"):
            if self.text(ident) in names:
                found |= self._use(ident, depth)
        return found

    def _aliases(self, body: Node, name: str) -> set[str]:
        """`name` and the pointer locals initialized from it (`T* row = x + i * d;`)."""
        names = {name}
        grew = True
        while grew:
            grew = False
            for d in descendants(body, "init_declarator"):
                target, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
                if target is None or value is None or target.type != "pointer_declarator":
                    continue
                ident = declarator_name(target)
                alias = self.text(ident) if ident is not None else ""
                if alias and alias not in names and any(self.text(i) in names for i in _identifiers(value)):
                    names.add(alias)
                    grew = True
        return names

    def _use(self, ident: Node, depth: int) -> Access:
        """How one occurrence of a pointer is used."""
        node: Node = ident
        parent = ident.parent
        if parent is not None and parent.type.endswith("declarator"):
            return Access.NONE  # the declaration of an alias, not a use
        # climb through pointer arithmetic, casts and parentheses: `reinterpret_cast<uint4*>(x + i)` is still x
        while parent is not None:
            call = parent.parent
            if parent.type == "argument_list" and call is not None and self._is_cast(call):
                node = call
            elif parent.type in ("parenthesized_expression", "cast_expression"):
                node = parent
            elif parent.type == "binary_expression":
                op = parent.child_by_field_name("operator")
                if op is not None and op.type in ("==", "!="):
                    return Access.NONE  # `p != nullptr` touches no element
                if op is None or op.type not in ("+", "-"):
                    return Access.READ
                node = parent
            else:
                break
            parent = node.parent
        if parent is None:
            return Access.READ
        if parent.type == "init_declarator" and parent.child_by_field_name("value") == node:
            return Access.NONE  # an alias (`T* row = x + i;`): its own uses count
        if parent.type in ("subscript_expression", "pointer_expression", "field_expression"):
            return self._element_use(parent)
        if parent.type == "argument_list" and parent.parent is not None:
            return self._argument_use(parent.parent, node, depth)
        return Access.READ

    def _is_cast(self, call: Node | None) -> bool:
        fn = call.child_by_field_name("function") if call is not None and call.type == "call_expression" else None
        return fn is not None and self.text(fn).split("<")[0].strip() in CASTS

    def _element_use(self, element: Node) -> Access:
        """`p[i]`, `*p` or `p->f`: written when assigned to (`+=` also reads), else read."""
        node, parent = element, element.parent
        while parent is not None and parent.type in _ELEMENT_WRAPPERS:
            node, parent = parent, parent.parent
        if parent is not None and parent.type == "assignment_expression" and parent.child_by_field_name("left") == node:
            op = parent.child_by_field_name("operator")
            if op is None or op.type != "=" or _data_dependent(parent):
                return Access.READ | Access.WRITE  # elements left unwritten keep their values
            return Access.WRITE
        if parent is not None and parent.type == "update_expression":
            return Access.READ | Access.WRITE
        if parent is not None and parent.type == "argument_list":  # `&p[i]` or `p[i]` handed to a call
            call = parent.parent
            return self._named_use(call) if call is not None else Access.READ
        return Access.READ

    def _argument_use(self, call: Node, argument: Node, depth: int) -> Access:
        """A pointer handed to a call: follow a device function of the file, else judge by the callee's name."""
        fn = call.child_by_field_name("function")
        if fn is None:
            return Access.READ
        callee = self.text(fn).split("<")[0].split("::")[-1].split(".")[-1].strip()
        if fn.type != "field_expression" and depth < _MAX_DEPTH:
            args = [c for c in argument.parent.named_children if c.type != "comment"] if argument.parent else []
            index = next((i for i, a in enumerate(args) if a == argument), -1)
            for params, body in self._definitions(callee):
                if 0 <= index < len(params) and params[index]:
                    return self.access(body, params[index], depth + 1)
        return self._named_use(call)

    def _named_use(self, call: Node) -> Access:
        fn = call.child_by_field_name("function")
        callee = self.text(fn).split("<")[0].split("::")[-1].split(".")[-1].strip() if fn is not None else ""
        if _ATOMIC.match(callee):
            return Access.READ | Access.WRITE
        if _STORE.search(callee) and not _LOAD.search(callee):
            return Access.WRITE
        return Access.READ  # a load, or a call we cannot see into: taken as a read

    def _definitions(self, name: str) -> list[tuple[list[str], Node]]:
        return device_definitions(self.model, self.root, self.data, name)


def device_definitions(model: SourceModel, root: Node, data: bytes, name: str) -> list[tuple[list[str], Node]]:
    """(parameter names, body node) of each device function of the file called `name`."""
    found = []
    for f in model.device_functions:
        if f.name != name:
            continue
        outer = root.descendant_for_byte_range(f.span.start_byte, f.span.end_byte)
        definition = next(iter(descendants(outer, "function_definition")), None) if outer else None
        body = definition.child_by_field_name("body") if definition is not None else None
        declarator = definition.child_by_field_name("declarator") if definition is not None else None
        while declarator is not None and declarator.type != "function_declarator":
            declarator = declarator.child_by_field_name("declarator")
        params = declarator.child_by_field_name("parameters") if declarator is not None else None
        if body is None or params is None:
            continue
        names = []
        for p in params.named_children:
            ident = declarator_name(p.child_by_field_name("declarator"))
            names.append(node_text(data, ident) if ident is not None else "")
        found.append((names, body))
    return found


def _data_dependent(node: Node) -> bool:
    """Whether a statement runs only where an `if` tests an array element (`if (!mask[i]) x[i] = ...;`)."""
    current = node.parent
    while current is not None and current.type != "function_definition":
        condition = current.child_by_field_name("condition") if current.type == "if_statement" else None
        if condition is not None and descendants(condition, "subscript_expression"):
            return True
        current = current.parent
    return False


def _identifiers(node: Node) -> list[Node]:
    return descendants(node, "identifier")
