"""grid_size: the cap of a grid computed by host code (`blocks = std::min(num_tokens, 256)`, a helper such as
`static int num_blocks(int n) { return std::min((n + 255) / 256, 1024); }`) as a launch parameter.

A helper called at the launch is written out there (the helper itself stays for its other callers), so the
grid's literals are where templatize can rewrite them, and those equal to the block size follow its
parameter. Only kernels that stride over the grid (read `gridDim.x`) may run on fewer blocks than items.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.model import Kernel, SourceModel
from cutune.cuda.syntax import declarator_name, int_value
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import Draft, KernelRewrite, KernelSource, Recipe, descendants
from cutune.template.recipes.host import HostResolver, OriginKind, launch_config

NAME = "MAX_BLOCKS"
CANDIDATES = (64, 128, 256, 512, 1024, 2048, 4096)
_COMMENT = "the most blocks the launch uses (the grid is the problem's block count capped at this)"
_MIN_CALLS = frozenset(("min", "std::min", "::min", "umin"))
_INTEGER = re.compile(rb"\b\d+[uUlL]*\b")
_MARK = "\x00"  # where the cap literal starts, while a helper's expression is being written out


@dataclass(frozen=True)
class _Grid:
    """What one launch's grid is: the cap literal (in host code at `cap`, or at `offset` of a helper's
    returned expression `inlined`), and the helper call to replace with `inlined` when there is one."""

    cap: Node | None
    call: Node | None = None  # the helper call written at the launch
    inlined: str = ""  # the helper's returned expression over the call's arguments
    offset: int = -1  # where the cap literal starts in `inlined`


class GridSize(Recipe):
    name = "grid_size"
    description = "the cap of a grid computed by host code or a helper function, as a launch parameter"

    def apply(self, model: SourceModel, kernel: Kernel, draft: Draft) -> Draft:
        src = KernelSource(model, kernel)
        if src.member_int(NAME) is not None:
            return self._draft(draft, src.member_int(NAME) or 0)  # already written
        launches = src.launches()
        if not launches:
            self.refuse(f"no launch of {kernel.name} in this file, so its grid is unknown")
        grids = [self._grid(src, call) for _, call in launches]
        capped = [g for g in grids if g.cap is not None]
        if not capped:
            self.refuse("no launch caps its grid (`std::min(blocks, 1024)` in host code or a helper)")
        values = {int_value(_literal_at(g) if g.call is not None else src.text(g.cap)) for g in capped if g.cap}
        value = values.pop()
        if values or value is None or len(capped) < len(grids):
            self.refuse("launch sites disagree on the grid cap")
        if "gridDim.x" not in "".join(src.text(src.body).split()):
            self.refuse(
                f"the grid is capped at {value} blocks, but the kernel does not read gridDim.x: it does not stride "
                "over the grid, so another cap would leave work undone or idle"
            )
        rewrite = KernelRewrite(src, self.name)
        block = draft.param(draft.block_threads) if draft.block_threads else None
        for g in capped:
            assert g.cap is not None
            if g.call is None:
                rewrite.replace_node(g.cap, src.ref(NAME, g.cap.start_byte))
                continue
            ref = src.ref(NAME, g.call.start_byte)
            text = g.inlined[: g.offset] + ref + g.inlined[g.offset + len(_literal_at(g)) :]
            if block is not None and src.member_int(block.name) is not None and isinstance(block.default, int):
                text = _block_literals(text, block.default, src.ref(block.name, g.call.start_byte))
            rewrite.replace_node(g.call, text)
        rewrite.member(NAME, value, _COMMENT, in_kernel=False)
        return self._draft(draft, value, text=rewrite.result())

    def _draft(self, draft: Draft, value: int, text: str | None = None) -> Draft:
        param = TunableParam(
            NAME, tuple(sorted(set(CANDIDATES) | {value})), value, Binding.LAUNCH, description=_COMMENT
        )
        return draft.extend(param, text=text)

    def _grid(self, src: KernelSource, call: Node) -> _Grid:
        """Where the cap of a launch's grid is written, following locals and one helper function."""
        resolver = HostResolver(src, call)
        node: Node | None = launch_config(call)[0]
        for _ in range(8):  # locals defined from locals
            if node is None or node.type != "identifier":
                break
            found = resolver.declaration(src.text(node))
            node = found[2][0] if found is not None and len(found[2]) == 1 else None
        if node is None:
            return _Grid(None)
        while node.type == "parenthesized_expression" and node.named_child_count == 1:
            node = node.named_children[0]
        if node.type != "call_expression":
            return _Grid(None)
        callee = _callee(src, node)
        if callee in _MIN_CALLS:
            args = resolver.arguments(node)
            origins = [resolver.resolve(a) for a in args]
            literal = [o for o in origins if o.kind is OriginKind.LITERAL]
            return _Grid(literal[0].node if len(args) == 2 and len(literal) == 1 else None)
        helper = _helper(src, callee)
        if helper is None:
            return _Grid(None)
        if isinstance(helper, int):
            self.refuse(
                f"the grid comes from the helper {callee} (line {helper}), which is more than one `return` "
                "expression: cutune cannot read its cap"
            )
        params, returned = helper
        passed = [src.text(a) for a in resolver.arguments(node)]
        if len(passed) != len(params):
            self.refuse(f"the helper {callee} (line {src.line(returned)}) is called with {len(passed)} arguments")
        inlined, offset = _inline(src, returned, dict(zip(params, passed, strict=True)))
        if offset < 0:
            self.refuse(
                f"the grid comes from the helper {callee} (line {src.line(returned)}), whose `return "
                f"{' '.join(src.text(returned).split())};` has no `min(blocks, literal)` cap to tune"
            )
        return _Grid(node, node, inlined, offset)


def _callee(src: KernelSource, call: Node) -> str:
    fn = call.child_by_field_name("function")
    return "".join(src.text(fn).split()) if fn is not None else ""


def _helper(src: KernelSource, name: str) -> tuple[list[str], Node] | int | None:
    """A function of the file called `name` whose body is one `return expression;`: its parameter names and
    that expression; the function's line when its body is anything else; None when the file has none."""
    for function in descendants(src.root, "function_definition"):
        declarator = function.child_by_field_name("declarator")
        while declarator is not None and declarator.type != "function_declarator":
            declarator = declarator.child_by_field_name("declarator")
        ident = declarator.child_by_field_name("declarator") if declarator is not None else None
        if declarator is None or ident is None or src.text(ident).split("::")[-1] != name.split("::")[-1]:
            continue
        body = function.child_by_field_name("body")
        statements = [c for c in body.named_children if c.type != "comment"] if body is not None else []
        if len(statements) != 1 or statements[0].type != "return_statement" or not statements[0].named_children:
            return src.line(function)
        parameters = declarator.child_by_field_name("parameters")
        names = (
            [declarator_name(p.child_by_field_name("declarator")) for p in parameters.named_children]
            if parameters
            else []
        )
        return [src.text(n) if n is not None else "" for n in names], statements[0].named_children[0]
    return None


def _inline(src: KernelSource, expression: Node, arguments: dict[str, str]) -> tuple[str, int]:
    """The helper's returned expression with its parameters replaced by the call's arguments, and the offset
    in it of the literal cap of its outermost `min(...)` (-1 when it has none)."""
    edits: list[tuple[int, int, str]] = []
    if expression.type == "call_expression" and _callee(src, expression) in _MIN_CALLS:
        args = expression.child_by_field_name("arguments")
        literals = [a for a in args.named_children if a.type == "number_literal"] if args is not None else []
        if len(literals) == 1 and args is not None and args.named_child_count == 2:
            edits.append((literals[0].start_byte, literals[0].start_byte, _MARK))
    for ident in descendants(expression, "identifier"):
        value = arguments.get(src.text(ident))
        if value is not None and not (ident.parent is not None and ident.parent.type == "call_expression"):
            edits.append((ident.start_byte, ident.end_byte, value if re.fullmatch(r"\w+", value) else f"({value})"))
    pieces, pos = [], expression.start_byte
    for start, end, new in sorted(edits):
        pieces += [src.data[pos:start].decode(), new]
        pos = end
    text = "".join(pieces) + src.data[pos : expression.end_byte].decode()
    return text.replace(_MARK, ""), text.find(_MARK)


def _literal_at(g: _Grid) -> str:
    m = re.match(r"\d+[uUlL]*", g.inlined[g.offset :])
    return m.group(0) if m else ""


def _block_literals(text: str, block: int, ref: str) -> str:
    """`(n + 255) / 256` with 256 and 255 written as the block-size parameter, so the grid follows it."""
    encoded = text.encode()

    def sub(m: re.Match[bytes]) -> bytes:
        value = int_value(m.group(0).decode())
        if value == block:
            return ref.encode()
        return f"({ref} - 1)".encode() if value == block - 1 else m.group(0)

    return _INTEGER.sub(sub, encoded).decode()
