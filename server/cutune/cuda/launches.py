"""Kernel launch sites `k<targs><<<grid, block, smem, stream>>>(args)` found in a parsed file, also those that
launch a local set to the kernel (`auto kernel = &k<Ktraits>; ... kernel<<<grid, block>>>(params);`, the way
code that sets the kernel's attributes first writes it)."""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from tree_sitter import Node

from cutune.cuda.decls import Decl, Declarations, DeclKind
from cutune.cuda.model import LaunchSite
from cutune.cuda.syntax import descendants, node_text, parse_tree, trim
from cutune.cuda.text import LineIndex

_CHEVRONS = re.compile(rb"<<<")


@dataclass(frozen=True)
class Launch:
    """A launch's syntax nodes, which the literal finder reads, and its LaunchSite, built when first asked for
    (on a file of thousands of launches most are never shown)."""

    call: Node  # the call expression
    kernel: str  # the unqualified kernel name
    config: tuple[Node, ...]  # grid, block[, smem[, stream]] expressions
    template_args: tuple[Node, ...]
    macro: str | None  # the `#define` whose body holds the launch
    through: str | None  # the local the launch calls the kernel through
    data: bytes = field(repr=False)
    index: LineIndex = field(repr=False)
    declarations: Declarations = field(repr=False)

    @functools.cached_property
    def function(self) -> Decl | None:
        """The enclosing function definition (looked up when asked for: most launches' never are)."""
        return self.declarations.function_at(self.call.start_byte) if self.macro is None else None

    @functools.cached_property
    def site(self) -> LaunchSite:
        """The launch site as the source model holds it."""
        data, index = self.data, self.index
        arg_list = self.call.child_by_field_name("arguments")
        config_ranges = [trim(data, c.start_byte, c.end_byte) for c in self.config]
        config_texts = [data[s:e].decode("utf-8", errors="replace") for s, e in config_ranges]
        return LaunchSite(
            kernel=self.kernel,
            template_args=tuple(node_text(data, a).strip() for a in self.template_args),
            grid=config_texts[0] if config_texts else "",
            block=config_texts[1] if len(config_texts) > 1 else "",
            shared_mem=config_texts[2] if len(config_texts) > 2 else None,
            stream=config_texts[3] if len(config_texts) > 3 else None,
            args=tuple(node_text(data, a).strip() for a in _expressions(arg_list)) if arg_list else (),
            span=index.span(self.call.start_byte, self.call.end_byte),
            config_spans=tuple(index.span(s, e) for s, e in config_ranges),
            template_arg_spans=tuple(index.span(a.start_byte, a.end_byte) for a in self.template_args),
            host_function=self.function.name if self.function is not None else self.macro,
            macro=self.macro,
            through=self.through,
        )


_CALLEE_REACH = 1024  # bytes before `<<<` a launch's kernel name (with its template arguments) is looked for in
# bytes before `<<<` the kernel's name is looked for in when the launch calls a local (set to the kernel earlier)
_LOCAL_REACH = 16384
_LOCAL_CALLEE = re.compile(rb"(?<![\w>:.])[A-Za-z_]\w*\s*$")  # a bare name right before `<<<`


def find_launches(
    root: Node,
    data: bytes,
    index: LineIndex,
    declarations: Declarations,
    kernel: str | None = None,
    within: tuple[int, int] | None = None,
) -> list[Launch]:
    """Every `<<<...>>>` launch in the tree and in the bodies of `#define`s, in source order; with `kernel`,
    those of that kernel; with `within`, those written in that byte range (the others are not built: a
    50,000-line file has thousands)."""
    near = kernel.encode() if kernel else None
    found = [_launch(call, data, index, declarations) for call in launch_calls(root, data, near, within)]
    for macro_root, name in macro_trees(root, data, near, within):
        calls = launch_calls(macro_root, data, near, within)
        found += [_launch(call, data, index, declarations, name) for call in calls]
    return sorted((lc for lc in found if kernel in (None, lc.kernel)), key=lambda lc: lc.call.start_byte)


def launch_at(launches: Sequence[Launch], offset: int) -> Launch | None:
    """Of launches in source order, the last one starting at or before `offset`, when its call contains it."""
    i = bisect.bisect_right(launches, offset, key=lambda lc: lc.call.start_byte) - 1
    return launches[i] if i >= 0 and offset < launches[i].call.end_byte else None


def _chevrons(data: bytes, near: bytes | None, within: tuple[int, int] | None = None) -> list[re.Match[bytes]]:
    """The `<<<` tokens of the text (in its bytes `within`); with `near`, those naming it in the bytes before them."""
    found = list(_CHEVRONS.finditer(data, *(within or (0, len(data)))))
    if near is None:
        return found
    written = [m.start() for m in re.finditer(re.escape(near), data)]  # where the name is, in order

    def written_within(at: int, reach: int) -> bool:  # the name wholly in the `reach` bytes before `at`
        i = bisect.bisect_left(written, at - reach)
        return i < len(written) and written[i] + len(near) <= at

    def names(m: re.Match[bytes]) -> bool:
        if written_within(m.start(), _CALLEE_REACH):
            return True
        if not written_within(m.start(), _LOCAL_REACH):
            return False
        return _LOCAL_CALLEE.search(data, max(0, m.start() - 64), m.start()) is not None

    return [m for m in found if names(m)]


def launch_calls(
    root: Node, data: bytes, near: bytes | None = None, within: tuple[int, int] | None = None
) -> list[Node]:
    """The call expressions of the `<<<...>>>` launches under `root` (with `near`, of launches naming it; with
    `within`, of those written in that byte range)."""
    calls = []
    for m in _chevrons(data, near, within):
        token = root.descendant_for_byte_range(m.start(), m.end())
        if token is None:
            continue
        config = token.parent
        call = config.parent if config is not None and config.type == "kernel_call_syntax" else None
        if call is not None and call.type == "call_expression":
            calls.append(call)
    return calls


def macro_trees(
    root: Node, data: bytes, near: bytes | None = None, within: tuple[int, int] | None = None
) -> list[tuple[Node, str]]:
    """Each `#define` whose body launches a kernel (with `near`, a launch naming it; with `within`, one written in
    that byte range), parsed as a function of the
    macro's name: the same bytes at the same offsets, the rest of the file blanked, so its nodes' offsets are
    those of the file."""
    found: list[tuple[Node, Node, str]] = []
    for match in _chevrons(data, near, within):
        node: Node | None = root.descendant_for_byte_range(match.start(), match.end())
        while node is not None and node.type not in ("preproc_function_def", "preproc_def"):
            node = node.parent
        body = node.child_by_field_name("value") if node is not None else None
        name = node.child_by_field_name("name") if node is not None else None
        if node is None or body is None or name is None or any(r[0] is node for r in found):
            continue
        found.append((node, body, node_text(data, name)))
    return [(parse_tree(_as_function(data, body, name)).root_node, name) for _, body, name in found]


def _as_function(data: bytes, body: Node, name: str) -> bytes:
    """The file's bytes with a macro body as a function body: `void NAME(){` over `#define NAME(...)`,
    line continuations blanked, `;}` after the body (a macro used as `LAUNCH(256);` often ends without one),
    everything else spaces (newlines kept but the one the `;}` covers)."""
    blank = bytearray(b if b == 0x0A else 0x20 for b in data)
    header = f"void {name}(){{".encode()
    start = data.rfind(b"#", 0, body.start_byte)
    blank[start : start + len(header)] = header
    code = data[body.start_byte : body.end_byte].replace(b"\\\n", b" \n").replace(b"\\\r\n", b"  \n")
    blank[body.start_byte : body.end_byte] = code
    blank[body.end_byte : body.end_byte + 2] = b";}"
    return bytes(blank)


def _launch(call: Node, data: bytes, index: LineIndex, declarations: Declarations, macro: str | None = None) -> Launch:
    fn = call.child_by_field_name("function")
    kernel, targs = _callee(fn, data)
    through = None
    if fn is not None and fn.type == "identifier" and (named := _set_to(call, fn, data, declarations)):
        kernels = {_callee(n, data)[0] for n in named}
        if len(kernels) == 1:  # one kernel; its template arguments where every instance it may be has the same
            through, (kernel, targs) = kernel, _callee(named[0], data)
            targs = targs if len({"".join(node_text(data, n).split()) for n in named}) == 1 else []
    config_node = next(c for c in call.children if c.type == "kernel_call_syntax")
    return Launch(
        call, kernel, tuple(_expressions(config_node)), tuple(targs), macro, through, data, index, declarations
    )


def _set_to(call: Node, local: Node, data: bytes, declarations: Declarations) -> list[Node]:
    """The kernels a launch's callee may be when it is a local declared in an enclosing block before the launch
    with a kernel as its value (`auto kernel = &k<T>;`, `k<T>`, a conditional between such, or a call of a function
    of the file that returns such: `fp_t kernel = pick_kernel(n);`) and assigned nowhere between: their name nodes
    (`k`, `ns::k`, `k<T>`); [] otherwise."""
    name = node_text(data, local)
    node: Node | None = call
    while node is not None and node.type != "function_definition":
        parent = node.parent
        if parent is not None and parent.type == "compound_statement":
            for s in reversed([c for c in parent.named_children if c.end_byte <= node.start_byte]):
                declarator = _declarator_of(s, name, data)
                if declarator is None:
                    continue
                value = declarator.child_by_field_name("value") if declarator.type == "init_declarator" else None
                function = parent
                while function.parent is not None and function.type != "function_definition":
                    function = function.parent
                assigned = any(
                    s.end_byte <= a.start_byte < call.start_byte and _names(data, a, name)
                    for a in descendants(function, "assignment_expression")
                )
                return _kernel_values(value, data, declarations) if value is not None and not assigned else []
        node = parent
    return []


def _declarator_of(statement: Node, name: str, data: bytes) -> Node | None:
    """The declarator of `statement` that declares the local `name` (`kernel = &k<T>`, `(*kernel)(P) = k`), when
    it is a declaration of it."""
    if statement.type != "declaration":
        return None
    for d in statement.children_by_field_name("declarator"):
        declared = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
        while declared is not None and declared.type != "identifier":  # through `*`, `(...)` and `(P)` wrappers
            declared = declared.child_by_field_name("declarator") or next(iter(declared.named_children), None)
        if declared is not None and node_text(data, declared) == name:
            return d
    return None


def _kernel_values(value: Node, data: bytes, declarations: Declarations, calls: int = 1) -> list[Node]:
    """The kernel name nodes `value` may denote: itself or its address, parenthesised or not; either arm of a
    conditional; what a function of the file returns (but a null pointer), followed `calls` deep. [] where one of
    them is something else."""
    while value.type == "parenthesized_expression" and value.named_child_count == 1:
        value = value.named_children[0]
    if value.type == "pointer_expression" and value.children[0].type == "&":
        argument = value.child_by_field_name("argument")
        return _kernel_values(argument, data, declarations, calls) if argument is not None else []
    arms: list[Node | None] = []
    deeper = calls
    if value.type == "conditional_expression":
        arms = [value.child_by_field_name("consequence"), value.child_by_field_name("alternative")]
    elif value.type == "call_expression" and calls > 0:
        arms, deeper = _returned(value.child_by_field_name("function"), data, declarations), calls - 1
    elif value.type in ("identifier", "qualified_identifier", "template_function"):
        return [value]
    found = [_kernel_values(a, data, declarations, deeper) if a is not None else [] for a in arms]
    return [n for f in found for n in f] if found and all(found) else []


_NULL = frozenset(("NULL", "nullptr", "0"))


def _returned(fn: Node | None, data: bytes, declarations: Declarations) -> list[Node | None]:
    """The values the host function `fn` names returns (a null pointer's left out), when the file defines it."""
    if fn is None or fn.type != "identifier":
        return []
    name = node_text(data, fn)
    defined = [d for d in declarations.holding(name) if d.kind is DeclKind.HOST_FUNCTION and d.name == name]
    if len(defined) != 1:
        return []
    returns = descendants(defined[0].item, "return_statement")
    values = [r.named_children[0] if r.named_child_count == 1 else None for r in returns]
    return [v for v in values if v is None or node_text(data, v).strip() not in _NULL]


def _callee(fn: Node | None, data: bytes) -> tuple[str, list[Node]]:
    """The unqualified kernel name and template arguments of `ns::k<...>`."""
    while fn is not None and fn.type == "qualified_identifier":
        fn = fn.child_by_field_name("name")
    if fn is None:
        return "", []
    if fn.type == "template_function":
        name = fn.child_by_field_name("name")
        targ_list = fn.child_by_field_name("arguments")
        targs = _expressions(targ_list) if targ_list is not None else []
        return (node_text(data, name) if name is not None else ""), targs
    return node_text(data, fn).strip(), []


def _expressions(node: Node) -> list[Node]:
    """The comma-separated items of an argument or launch-configuration list."""
    return [c for c in node.named_children if c.type != "comment"]


def _names(data: bytes, assignment: Node, name: str) -> bool:
    """Whether `assignment` sets the local `name`."""
    left = assignment.child_by_field_name("left")
    return left is not None and node_text(data, left) == name
