"""items_per_thread: each thread handles ITEMS_PER_THREAD consecutive block-chunks, and the grid shrinks
by as much. For a one-element-per-thread kernel the body becomes a loop over the chunks; for a
grid-stride loop only the launch's grid changes (any grid is correct for a grid-stride loop).

Coverage stays exact: ceil(ceil(n / B) / I) blocks of I chunks of B threads cover ceil(n / B) chunks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.model import Kernel, LaunchSite, SourceModel
from cutune.cuda.syntax import int_value, nested_scope
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import Draft, KernelRewrite, KernelSource, Recipe, descendants
from cutune.template.recipes.host import HostResolver, launch_config

NAME = "ITEMS_PER_THREAD"
CANDIDATES = (1, 2, 4, 8)
_LOOP_COMMENT = "consecutive block-chunks each thread handles (the grid shrinks by as much)"
_GRID_COMMENT = "grid-stride iterations per thread (the grid shrinks by as much)"
# block-level cooperation: barriers, shared memory, warp collectives, cooperative groups
_COOPERATION = re.compile(
    r"__syncthreads\w*|__syncwarp|__shfl\w*|__ballot_sync|__any_sync|__all_sync|__activemask|__reduce_\w+_sync"
    r"|__match_\w+|cooperative_groups|this_thread_block|tiled_partition|this_grid|__shared__"
)
_SIMPLE = ("identifier", "call_expression", "parenthesized_expression", "field_expression", "number_literal")


@dataclass(frozen=True)
class _ElementForm:
    """A one-element-per-thread body: the index declaration, the blockIdx.x in it, the statements to loop."""

    index: Node
    block_idx: Node
    region: tuple[int, int]
    returns: tuple[Node, ...]


class ItemsPerThread(Recipe):
    name = "items_per_thread"
    description = "several consecutive block-chunks per thread and a smaller grid (or a smaller grid-stride grid)"

    def apply(self, model: SourceModel, kernel: Kernel, draft: Draft) -> Draft:
        src = KernelSource(model, kernel)
        if src.struct is not None and src.struct.member(NAME) is not None:
            value = src.member_int(NAME) or 1
            return self._draft(draft, value, src.member_comment(NAME, _LOOP_COMMENT), src.binding_of(NAME))
        launches = src.launches()
        if not launches:
            self.refuse(f"no launch of {kernel.name} in this file, so there is no grid to divide")
        grid_stride = self._grid_stride(src)
        rewrite = KernelRewrite(src, self.name)
        if grid_stride:
            comment = _GRID_COMMENT
        else:
            self._check_block_stride(src, draft)
            self._check_cooperation(src)
            self._rewrite_body(src, rewrite, self._element_form(src))
            comment = _LOOP_COMMENT
        done: set[int] = set()
        for site, call in launches:
            self._rewrite_grid(src, rewrite, site, call, done)
        rewrite.member(NAME, 1, comment, in_kernel=not grid_stride)
        binding = Binding.LAUNCH if grid_stride else Binding.TEMPLATE
        return self._draft(draft, 1, comment, binding, text=rewrite.result())

    def _draft(self, draft: Draft, value: int, comment: str, binding: Binding, text: str | None = None) -> Draft:
        values = tuple(sorted(set(CANDIDATES) | {value}))
        return draft.extend(TunableParam(NAME, values, value, binding, description=comment), text=text)

    def _grid_stride(self, src: KernelSource) -> bool:
        """Whether the kernel steps a loop by the whole grid (`i += blockDim.x * gridDim.x`, or by a local
        computed from gridDim)."""
        strides = {
            src.text(target)
            for d in src.in_body("init_declarator")
            if (target := d.child_by_field_name("declarator")) is not None and "gridDim" in src.text(d)
        }
        for loop in src.in_body("for_statement"):
            update = loop.child_by_field_name("update")
            if update is not None and ("gridDim" in src.text(update) or _step(src, update) in strides):
                return True
        return False

    def _check_block_stride(self, src: KernelSource, draft: Draft) -> None:
        block_names = {"blockDim.x", draft.block_threads} if draft.block_threads else {"blockDim.x"}
        for loop in src.in_body("for_statement"):
            update = loop.child_by_field_name("update")
            if update is not None and _step(src, update) in block_names:
                self.refuse(
                    f"already loops inside the block (the loop at line {src.line(loop)} steps by "
                    f"{_step(src, update)}): one block per row"
                )

    def _check_cooperation(self, src: KernelSource) -> None:
        for node in src.in_body("identifier", "namespace_identifier", "type_qualifier"):
            if _COOPERATION.fullmatch(src.text(node)):
                self.refuse(
                    f"the kernel uses {src.text(node)} (line {src.line(node)}): threads of a block cooperate, "
                    "so one thread cannot take several block-chunks"
                )

    def _element_form(self, src: KernelSource) -> _ElementForm:
        statements = [c for c in src.body.named_children if c.type != "comment"]
        found = next(((i, s, b) for i, s in enumerate(statements) if (b := _index_declaration(src, s))), None)
        if found is None:
            self.refuse("no index of the form `i = blockIdx.x * blockDim.x + threadIdx.x` declared in the kernel body")
        i, index, block_idx = found
        name = src.text(_declared(index))
        others = [
            n
            for n in src.in_body("identifier")
            if src.text(n) in ("blockIdx", "gridDim") and not (index.start_byte <= n.start_byte < index.end_byte)
        ]
        if others:
            self.refuse(
                f"{src.text(others[0].parent or others[0])} is used beyond the index (line {src.line(others[0])}), so "
                "block-chunks are not independent"
            )
        rest = statements[i + 1 :]
        guard = next((j for j, s in enumerate(rest) if s.type != "declaration"), None)
        if guard is None or rest[guard].type != "if_statement" or not _guards(src, rest[guard], name, rest[guard:]):
            self.refuse(
                f"no bounds check on {name} right after it (`if ({name} < n) {{...}}` as the last statement, "
                f"or `if ({name} >= n) return;`), so extra chunks would run past the end"
            )
        region = (index.start_byte, src.body.named_children[-1].end_byte)
        returns = []
        for r in descendants(src.body, "return_statement"):
            scope = nested_scope(r, src.body)
            if not region[0] <= r.start_byte < region[1] or (scope is not None and scope.type == "lambda_expression"):
                continue  # a lambda's own return stays one
            if scope is not None:
                self.refuse(f"a `return` inside a loop or switch (line {src.line(r)}) cannot become `continue`")
            returns.append(r)
        return _ElementForm(index, block_idx, region, tuple(returns))

    def _rewrite_body(self, src: KernelSource, rewrite: KernelRewrite, form: _ElementForm) -> None:
        used = {src.text(n) for n in src.in_body("identifier")}
        item = next(n for n in ("item", "item_", "cutune_item") if n not in used)
        start, end = form.region
        chunk = f"blockIdx.x * {NAME} + {item}"
        wrapped = form.block_idx.parent is not None and form.block_idx.parent.type in (
            "argument_list",
            "parenthesized_expression",
        )
        local = [(form.block_idx, chunk if wrapped else f"({chunk})")] + [(r, "continue;") for r in form.returns]
        pieces, pos = [], start
        for node, new in sorted(local, key=lambda e: e[0].start_byte):
            pieces += [src.data[pos : node.start_byte].decode(), new]
            pos = node.end_byte
        pieces.append(src.data[pos:end].decode())
        indent = src.data[src.data.rfind(b"\n", 0, start) + 1 : start].decode()
        lines = "".join(pieces).split("\n")
        # one level deeper, except blank lines and preprocessor lines (which stay where they were written)
        body = "\n".join(
            [lines[0]] + ["  " + ln if ln.strip() and not ln.lstrip().startswith("#") else ln for ln in lines[1:]]
        )
        rewrite.replace(start, end, f"for (int {item} = 0; {item} < {NAME}; ++{item}) {{\n{indent}  {body}\n{indent}}}")

    def _rewrite_grid(
        self, src: KernelSource, rewrite: KernelRewrite, site: LaunchSite, call: Node, done: set[int]
    ) -> None:
        resolver = HostResolver(src, call)
        grid = launch_config(call)[0]
        dims = resolver.dims_of(grid)
        if dims is None and grid.type == "identifier" and resolver.declaration(src.text(grid)) is None:
            self.refuse(
                f"the grid `{src.text(grid)}` (line {src.line(grid)}) is not declared where the kernel is launched"
            )
        target = grid
        if dims is not None:
            holder, args = dims
            if len(args) > 1 and any(int_value(src.text(a)) != 1 for a in args[1:]):
                self.refuse(
                    f"the grid `{src.text(grid)}` (line {src.line(holder)}) is a dim3 "
                    "with more than one dimension above 1"
                )
            if not args:
                self.refuse(f"the grid at line {src.line(grid)} has no size")
            target = args[0]
            shared = [
                s
                for s in src.model.launches
                if s.kernel != src.kernel.name
                and grid.type == "identifier"
                and s.grid == src.text(grid)
                and s.host_function == site.host_function
            ]
            if shared:
                self.refuse(f"the grid `{src.text(grid)}` is also used to launch {shared[0].kernel}")
        if target.start_byte in done:
            return
        done.add(target.start_byte)
        ref = src.ref(NAME, target.start_byte)
        inner = src.text(target) if target.type in _SIMPLE else f"({src.text(target)})"
        rewrite.replace_node(target, f"({inner} + {ref} - 1) / {ref}")


def _step(src: KernelSource, update: Node) -> str:
    """What `i += X` adds, without spaces ('' for other updates)."""
    if update.type == "assignment_expression" and src.field(update, "operator") == "+=":
        right = update.child_by_field_name("right")
        return "".join(src.text(right).split()) if right is not None else ""
    return ""


def _bare(src: KernelSource, node: Node) -> Node:
    """The expression inside parentheses and casts."""
    while True:
        if node.type == "parenthesized_expression" and node.named_child_count == 1:
            node = node.named_children[0]
        elif node.type == "cast_expression" and (value := node.child_by_field_name("value")) is not None:
            node = value
        elif node.type == "call_expression" and src.text(node).startswith("static_cast"):
            args = node.child_by_field_name("arguments")
            if args is None or args.named_child_count != 1:
                return node
            node = args.named_children[0]
        else:
            return node


def _index_declaration(src: KernelSource, statement: Node) -> Node | None:
    """For `T i = blockIdx.x * X + threadIdx.x;` (either order, casts allowed): the blockIdx.x node."""
    if statement.type != "declaration":
        return None
    declarators = statement.children_by_field_name("declarator")
    if len(declarators) != 1 or declarators[0].type != "init_declarator":
        return None
    value = declarators[0].child_by_field_name("value")
    if value is None:
        return None
    total = _bare(src, value)
    if total.type != "binary_expression" or src.field(total, "operator") != "+":
        return None
    left, right = total.child_by_field_name("left"), total.child_by_field_name("right")
    for product, thread in ((left, right), (right, left)):
        if product is None or thread is None or _text(src, _bare(src, thread)) != "threadIdx.x":
            continue
        product = _bare(src, product)
        if product.type != "binary_expression" or src.field(product, "operator") != "*":
            continue
        a, b = product.child_by_field_name("left"), product.child_by_field_name("right")
        for block, size in ((a, b), (b, a)):
            if block is None or size is None:
                continue
            inner = _bare(src, block)
            if _text(src, inner) == "blockIdx.x" and (
                _text(src, _bare(src, size)) == "blockDim.x" or _bare(src, size).type == "identifier"
            ):
                return inner
    return None


def _guards(src: KernelSource, guard: Node, name: str, rest: list[Node]) -> bool:
    """Whether `guard` bounds the index: `if (i < n) {...}` last, or `if (i >= n) return;`."""
    condition = guard.child_by_field_name("condition")
    consequence = guard.child_by_field_name("consequence")
    if condition is None or consequence is None or guard.child_by_field_name("alternative") is not None:
        return False
    test = _bare(src, condition.named_children[0]) if condition.named_children else condition
    if test.type != "binary_expression":
        return False
    op = src.field(test, "operator")
    left, right = "".join(src.field(test, "left").split()), "".join(src.field(test, "right").split())
    below = (left == name and op == "<") or (right == name and op == ">")
    beyond = (left == name and op == ">=") or (right == name and op == "<=")
    if below:
        return len(rest) == 1
    if beyond:
        body = consequence
        if body.type == "compound_statement" and body.named_child_count == 1:
            body = body.named_children[0]
        return body.type == "return_statement"
    return False


def _declared(declaration: Node) -> Node:
    declarator = declaration.child_by_field_name("declarator")
    name = declarator.child_by_field_name("declarator") if declarator is not None else None
    return name if name is not None else declaration


def _text(src: KernelSource, node: Node) -> str:
    return "".join(src.text(node).split())
