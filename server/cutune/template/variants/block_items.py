"""block_items: a one-block-per-item kernel (the block index is the work item) runs ITEMS_Y items side by side in
one block, one item per row of threads along y, so small blocks (a warp per item, as dequantisation, per-token
elementwise and per-head kernels launch) fill an SM with fewer, larger blocks.

Item `blockIdx.x` becomes `cutune_item = blockIdx.x * blockDim.y + threadIdx.y`, and `gridDim.x` becomes
`gridDim.x * blockDim.y`: every thread computes exactly what the thread with the same `threadIdx.x` computed in
block `cutune_item` of the original launch, so the body stays as written. That holds only where the rows of a
block never meet: each item gets its own copy of the body's static shared arrays and its own slice of the dynamic
shared memory (the launch's bytes rounded up to 128, times the items), and `__syncthreads()` is reached alike by
every item (item_shared; ITEMS_Y is then a template argument, the arrays' first size), no barrier that
counts or votes, no block-wide cooperative group (a warp-level exchange stays
within one item when the block's x size is a whole number of warps, which the launch checks), no other use of
the block's y or z axis, no helper or macro of the file and no inline PTX that reads the block index, grid size or
block shape itself, no clusters. A lambda of the body is rewritten with it; one reading the block index must
capture by default (`[=]`, `[&]`), so that it captures the item too. (Helpers and macros the file does not
define are taken at their word: what they compute, as every variant, is checked equal to the original before it
is searched.)

Chained onto row_reduce's variant (where that rewrite cannot put rows on y itself: a grid over more than x, a row
staged in dynamic shared memory), short rows share a block too: the rewrite's reductions are calls of its helper,
which takes the row's slots from the body (each item its own copy) and waits at one barrier inside, so each call
counts as a barrier that every item must reach alike. Its shuffles stay within a row's lanes, so items of fewer
than 32 threads may share a warp.

The launch keeps the original's item count: the block gets ITEMS_Y rows only where the items divide evenly, the
block stays within the device's and the kernel's `__launch_bounds__` limits (and is whole warps, when warps
exchange values); elsewhere it runs one row, the original. The block's y size carries ITEMS_Y into the kernel,
so one instantiation serves every size.

Each row of threads may also run ITEMS_T items one after another (a template argument; 1 as above), in a loop the
compiler unrolls: a thread that computes a few values of one item and exits (a dequantiser's 4 weights from 6
byte loads) holds one item's loads in flight at a time, so the SM's threads bound the bytes in flight; with several
items a thread, the loads of the next items are issued before the first one's stores. Item `j` of block row `r` is
`(blockIdx.x * ITEMS_T + j) * blockDim.y + r` (at each `j` the block's rows take consecutive items), `gridDim.x`
the original's `gridDim.x * blockDim.y * ITEMS_T`, and a `return` of the body ends only its item (`continue`).
The launch divides the grid by ITEMS_Y * ITEMS_T only where that divides the items; elsewhere it launches one row a
block, and a block of one row runs the body once, as written (so ITEMS_T > 1 needs ITEMS_Y > 1: the block's y size
tells the kernel which launch it got). A parameter the body moves (`x += row * n;`) is set back to its launch value
before each item. Offered only where the items cannot meet within a row either: no shared memory or barrier in the
body (one item's last reads of a shared array would race the next item's writes), no `return` inside a loop or
switch (it would not end the item), none at all where warps exchange values (a thread going on to the next item
would meet its exchange while the others are at this one's), no label (the body is written twice), no parameter's
address taken or reference bound to it (a write through those would carry over to the next item).
"""

from __future__ import annotations

import re
import textwrap

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.syntax import nested_scope
from cutune.errors import TransformRefused
from cutune.spec import KernelSpec
from cutune.template.edits import EditList
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.item_shared import (
    DYNAMIC_HELPER,
    barrier_blocker,
    barriers,
    cooperating_call,
    dynamic_shared,
    outer_shared,
    per_item_shared,
    shared_declarations,
)
from cutune.template.variants.loops import edited_body, kernel_source, squeezed, stride_loops
from cutune.template.variants.model import Launch, Provenance, Transform, Variant
from cutune.template.variants.row_reduce import ALLREDUCE, ROW_FILLS_WARP, THREADS

NAME = "block_items"
ITEMS = "ITEMS_Y"
ITEMS_T = "ITEMS_T"
ITEM = "cutune_item"
# what makes the rows of one block meet: block-wide barriers that count or vote, block-wide groups and libraries
# (static shared memory and plain `__syncthreads()`: item_shared gives each item its own copy and checks the barriers)
_BLOCK_WIDE = re.compile(
    r"__syncthreads_\w+|cooperative_groups|this_thread_block|this_grid|this_cluster|cub|grid_group"
)
# in a helper the kernel calls: shared memory and barriers too (a helper's arrays and barriers are not rewritten)
_HELPER_BLOCK_WIDE = re.compile(rf"__shared__|__syncthreads|{_BLOCK_WIDE.pattern}")
# PTX that reads the block's place or shape, or waits at a barrier
_ASM_LAYOUT = re.compile(r"ctaid|nctaid|%tid\.[yz]|ntid|\bbar\.|barrier|cluster")
# what makes the threads of one warp meet: fine while a warp lies within one item
_WARP_NAMED = re.compile(r"warp_?(?:all_?)?(?:reduce|sum|max|min|scan|broadcast|shfl|shuffle|vote)", re.I)
_WARP_WIDE = re.compile(
    r"__syncwarp|__shfl\w*|__ballot_sync|__any_sync|__all_sync|__activemask|__reduce_\w+_sync|__match_\w+"
    r"|tiled_partition|__any|__all|__ballot"
)
_OTHER_AXES = re.compile(r"(threadIdx|blockDim)\s*\.\s*[yz]\b")
_GRID_READS = re.compile(r"\b(blockIdx|gridDim)\b")
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^<>;{}]*>)?\s*\(")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)((?:[^\n]*\\\n)*[^\n]*)", re.M)


class BlockItems(Transform):
    """Several items of a one-block-per-item kernel in one block, one per row of threads along y."""

    name = NAME
    # on split_items' body it would pack again the items that body spreads over blocks; on thread_packs' it fills the
    # SM with the threads whose fewer memory instructions that body saves; on row_reduce's, where that body cannot put
    # rows on y itself (a grid over more than x, a row staged in dynamic shared memory), short rows share a block
    chains_onto = frozenset({"thread_packs", "row_reduce"})

    def apply(self, model: SourceModel, kernel: str, spec: KernelSpec | None) -> Variant:
        """The variant of `kernel` with ITEMS_Y items per block, or TransformRefused saying why not."""
        src = kernel_source(self.name, model, kernel)
        if spec is not None and any(squeezed(b) != "1" for b in spec.block[1:]):
            self.refuse("the launch's block has more than one dimension already")
        loops, _ = stride_loops(src)
        grid = next((lp for lp in loops if lp.grid_stride), None)
        if grid is not None:
            self.refuse(
                f"the loop at line {src.line(grid.node)} is grid-stride: any grid covers its range (grid_shape)"
            )
        for node in src.in_body("field_expression"):
            if _OTHER_AXES.fullmatch(squeezed(src.text(node))):
                self.refuse(f"uses {squeezed(src.text(node))} (line {src.line(node)}): the block has rows already")
        for node in src.in_body("identifier"):
            parent = node.parent
            if src.text(node) in ("blockIdx", "gridDim") and (parent is None or parent.type != "field_expression"):
                self.refuse(f"reads {src.text(node)} whole (line {src.line(node)}): only its x axis can be remapped")
            if src.text(node) == ITEM:
                self.refuse(f"already names something {ITEM} (line {src.line(node)})")
        for node in src.in_body("identifier", "namespace_identifier", "type_qualifier", "type_identifier"):
            if _BLOCK_WIDE.fullmatch(src.text(node)):
                self.refuse(
                    f"threads of a block cooperate through {src.text(node)} (line {src.line(node)}): items sharing "
                    "a block would share it"
                )
        called = _called_helpers(src)  # the file's helpers the kernel reaches, read once
        helper = _helper_reading_grid(called) or outer_shared(src)
        if helper is not None:
            self.refuse(helper)
        cooperating = cooperating_call(src, {n for n, _ in called} | {"__syncthreads"})
        if cooperating is not None:
            self.refuse(cooperating)
        macro = _macro_reading_grid(src)
        if macro is not None:
            self.refuse(macro)
        body = src.text(src.body)
        if re.search(r"\basm\b", body) and _ASM_LAYOUT.search(body):
            self.refuse("inline PTX reads the block's place or shape, or waits at a barrier")
        if src.kernel.launch_bounds is not None and src.kernel.launch_bounds.max_cluster is not None:
            self.refuse("the kernel runs in thread block clusters, which group blocks by their index")
        if not any(squeezed(src.text(n)) == "blockIdx.x" for n in src.in_body("field_expression")):
            self.refuse("the kernel does not read blockIdx.x: it is not one block per item")
        for lam in src.in_body("lambda_expression"):
            # the item is a local of the kernel: a lambda reading it must capture it, which only a default capture
            # (`[=]`, `[&]`) does without changing its capture list
            captures = lam.child_by_field_name("captures")
            default = captures is not None and any(c.type == "lambda_default_capture" for c in captures.children)
            reads = [n for n in descendants(lam, "field_expression") if squeezed(src.text(n)) == "blockIdx.x"]
            if reads and not default:
                self.refuse(
                    f"a lambda reads blockIdx.x (line {src.line(reads[0])}) but captures only what it names: the "
                    f"item, {ITEM}, is not among its captures"
                )
        # row_reduce's all-reduce exchanges values only among its row's lanes (the x extent): several items may share
        # a warp there, as rows of fewer than 32 threads do
        warps = any(
            _WARP_WIDE.fullmatch(src.text(n)) for n in src.in_body("identifier", "namespace_identifier")
        ) or any(_WARP_WIDE.search(t) for name, t in called if name != ALLREDUCE)
        # a helper the file does not define, named for a warp's exchange (`warp_reduce_max`): taken at its word
        warps = warps or any(_WARP_NAMED.search(_called_name(src.text(c))) for c in src.in_body("call_expression"))
        limit = _launch_bound(self, src)
        # on row_reduce's body: rows of fewer threads than a warp fill one when items share the block
        reduced = any(n == ALLREDUCE for n, _ in called)
        edits = EditList(src.data)
        shared = bool(shared_declarations(src) or barriers(src))
        if shared:  # each item its own shared arrays, its rows sized by the template parameter
            why = barrier_blocker(src) or per_item_shared(src, edits, ITEMS)
            if why:
                self.refuse(why)
        _remap(src, edits, "(gridDim.x * blockDim.y)")
        first = src.body.start_byte + 1
        edits.insert(
            first,
            f"\n  // cutune block_items: blockDim.y items per block, item {ITEM} on the threads of row threadIdx.y\n"
            f"  const unsigned int {ITEM} = blockIdx.x * blockDim.y + threadIdx.y;",
        )
        inner = edited_body(src, edits)
        # dynamic shared memory cut into one slice an item (item_shared), the launch giving each its own; where the
        # body declares none, what a launch gives it is read by nothing of the kernel's (a helper's is refused above)
        dynamic = dynamic_shared(src)
        # a row's items one after another: not where the body's items could meet through shared memory or barriers
        looped = None if shared or reduced or dynamic else _looped_body(src, warps)
        if looped is not None:
            inner = looped + inner
        rows = _rows(limit, warps, looped is not None)
        return Variant(
            name=NAME,
            body=inner,
            params=(
                TunableParam(
                    ITEMS,
                    (1, 2, 4, 8),
                    1,
                    Binding.TEMPLATE if shared else Binding.LAUNCH,
                    description="work items per block (block y)" + ("; each its own shared arrays" if shared else ""),
                    try_first=4,  # the ITEMS_Y the corpus searches kept most often (12 of 18 sizes; runs 32-96)
                ),
                *(
                    (
                        TunableParam(
                            ITEMS_T,
                            (1, 2, 4, 8),
                            1,
                            Binding.TEMPLATE,
                            description="work items each row of threads runs one after another",
                            try_first=4,  # q2_K's dequantiser: 4 and 8 items a thread 1.26× over 1 (probe, run 146)
                        ),
                    )
                    if looped is not None
                    else ()
                ),
            ),
            constraints=(f"{ITEMS_T} == 1 or {ITEMS} > 1",) if looped is not None else (),
            lifts=((ROW_FILLS_WARP, f"{THREADS} * {ITEMS} >= warp_size"),) if reduced else (),
            launch=Launch(
                grid=(
                    f"({{grid}}) // ({rows} * {ITEMS_T} if {rows} > 1 else 1)"
                    if looped is not None
                    else f"({{grid}}) // {rows}",
                    "{grid}",
                    "{grid}",
                ),
                block=("{block}", rows),
                shared_mem=f"round_up({{shared_mem}}, 128) * {rows}" if dynamic else "{shared_mem}",
            ),
            helpers=DYNAMIC_HELPER if dynamic else "",
            provenance=Provenance(
                self.name,
                note=f"{ITEMS} items per block, one per row of threads (block y)"
                + (f"; {ITEMS_T} items a row of threads, one after another" if looped is not None else "")
                + ("; whole warps only, as warps exchange values" if warps else "")
                + ("; each item its own copy of the shared arrays, the barriers reached alike" if shared else "")
                + (
                    "; each its slice of the dynamic shared memory, the launch's bytes rounded up to 128 an item"
                    if dynamic
                    else ""
                ),
            ),
        )

    def refuse(self, reason: str) -> None:
        """Stop: this kernel cannot hold several items per block, for `reason`."""
        raise TransformRefused(self.name, reason)


def _looped_body(src: KernelSource, warps: bool) -> str | None:
    """The body run for ITEMS_T items a row of threads, one after another, where a block has several rows (before
    the body as written, which a block of one row runs); None where that would change what an item computes (a
    thread's `return` where its warp exchanges values: as `continue`, the thread would meet the next item's exchange
    while the others are at this one's)."""
    if src.in_body("labeled_statement"):
        return None  # the body is written twice: a label would be defined twice
    edits = EditList(src.data)
    for ret in src.in_body("return_statement"):
        scope = nested_scope(ret, src.body)
        if scope is not None and scope.type == "lambda_expression":
            continue  # the lambda's own return
        if scope is not None or warps:
            return None  # in a loop or switch `continue` would not end the item; beside a warp exchange, see above
        edits.replace(ret.start_byte, ret.end_byte, "continue;")
    written = _written_parameters(src)
    if written is None:
        return None
    _remap(src, edits, f"(gridDim.x * blockDim.y * {ITEMS_T})")
    body = textwrap.indent(textwrap.dedent(edited_body(src, edits)).strip("\n"), " " * 8)
    # a parameter the body moves (`x += row * n;`) starts each item where the launch set it
    saved = "".join(f"      const auto cutune_j_{name} = {name};\n" for name in written)
    restored = "".join(f"        {name} = cutune_j_{name};\n" for name in written)
    return (
        f"\n  if constexpr ({ITEMS_T} > 1) {{\n"
        f"    if (blockDim.y > 1) {{  // cutune block_items: {ITEMS_T} items a row of threads, one after another\n"
        f"{saved}"
        "      #pragma unroll\n"
        f"      for (unsigned int cutune_j = 0; cutune_j < {ITEMS_T}; ++cutune_j) {{\n"
        f"        const unsigned int {ITEM} = (blockIdx.x * {ITEMS_T} + cutune_j) * blockDim.y + threadIdx.y;\n"
        f"{restored}"
        f"{body}\n"
        "      }\n"
        "      return;\n"
        "    }\n"
        "  }"
    )


def _written_parameters(src: KernelSource) -> list[str] | None:
    """The kernel's parameters its body assigns (whole or a member: `x += row * n;`, `args.n = 0;`), which each
    item of a row must start from anew; None where the body takes a parameter's address or binds a reference to it
    (a write through those would not be seen)."""
    params = {p.name for p in src.kernel.params}
    written: set[str] = set()
    for node in src.in_body("assignment_expression", "update_expression"):
        target = node.child_by_field_name("left" if node.type == "assignment_expression" else "argument")
        while target is not None and (
            target.type == "parenthesized_expression"
            or (target.type == "field_expression" and _operator(src, target) == ".")
        ):
            target = (
                target.named_children[0]
                if target.type == "parenthesized_expression"
                else target.child_by_field_name("argument")
            )
        if target is not None and target.type == "identifier" and src.text(target) in params:
            written.add(src.text(target))
    for node in src.in_body("pointer_expression", "init_declarator"):
        if node.type == "pointer_expression":  # `&x`
            shared = _operator(src, node) == "&"
            named = node.child_by_field_name("argument")
        else:  # `T& r = x;`
            declarator = node.child_by_field_name("declarator")
            shared = declarator is not None and declarator.type == "reference_declarator"
            named = node.child_by_field_name("value")
        if shared and named is not None and named.type == "identifier" and src.text(named) in params:
            return None
    return sorted(written)


def _operator(src: KernelSource, node: Node) -> str:
    """The text of a node's operator field ('' where it has none)."""
    op = node.child_by_field_name("operator")
    return src.text(op) if op is not None else ""


def _remap(src: KernelSource, edits: EditList, grid_x: str) -> None:
    """Edits of the body that read the item for `blockIdx.x` and the original launch's grid, `grid_x`, for
    `gridDim.x`."""
    for node in src.in_body("field_expression"):
        text = squeezed(src.text(node))
        if text == "blockIdx.x":
            edits.replace(node.start_byte, node.end_byte, ITEM)
        elif text == "gridDim.x":
            edits.replace(node.start_byte, node.end_byte, grid_x)


def _rows(limit: str, warps: bool, looped: bool = False) -> str:
    """The launch's rows per block: ITEMS_Y where the items divide evenly (into ITEMS_T items a row, where the body
    runs several) and the block stays within its limits, else 1 (the original launch)."""
    tests = [
        f"({{grid.x}}) % ({ITEMS} * {ITEMS_T}) == 0" if looped else f"({{grid.x}}) % {ITEMS} == 0",
        f"({{block.x}}) * {ITEMS} <= max_threads_per_block",
        *([f"({{block.x}}) * {ITEMS} <= {limit}"] if limit else []),
        *(["({block.x}) % warp_size == 0"] if warps else []),
    ]
    return f"({ITEMS} if {' and '.join(tests)} else 1)"


def _launch_bound(t: BlockItems, src: KernelSource) -> str:
    """The kernel's `__launch_bounds__` thread cap as a number ('' when it has none); a refusal when it is not one."""
    bounds = src.kernel.launch_bounds
    if bounds is None:
        return ""
    cap = squeezed(bounds.max_threads)
    if not cap.isdigit():
        t.refuse(f"__launch_bounds__({bounds.max_threads}) caps the block at a count the launch cannot compare")
    return cap


def _called_helpers(src: KernelSource) -> list[tuple[str, str]]:
    """The file's `__device__` function definitions the kernel calls, and those they call in turn: (name, text)
    each, found in the file's text by name."""
    text = src.model.text
    todo = {_called_name(src.text(c)) for c in src.in_body("call_expression")} - {""}
    seen: set[str] = set()
    found: list[tuple[str, str]] = []
    while todo - seen:
        names = todo - seen
        seen |= names
        pattern = rf"__device__[^;{{}}]*?\b({'|'.join(re.escape(n) for n in sorted(names))})\s*\("
        for m in re.finditer(pattern, text):
            definition = _definition(text, m.start(), m.end() - 1)
            if definition is not None:
                found.append((m.group(1), definition))
                todo |= set(_CALLED.findall(definition))
    return found


def _definition(text: str, start: int, paren: int) -> str | None:
    """The text of the function definition from `start` whose parameter list opens at `paren`; None for a
    declaration (no body)."""
    depth, at = 0, paren
    while at < len(text):
        depth += {"(": 1, ")": -1}.get(text[at], 0)
        at += 1
        if depth == 0:
            break
    body = min((i for i in (text.find("{", at), text.find(";", at)) if i >= 0), default=-1)
    if body < 0 or text[body] == ";":
        return None
    depth, at = 0, body
    while at < len(text):
        depth += {"{": 1, "}": -1}.get(text[at], 0)
        at += 1
        if depth == 0:
            return text[start:at]
    return None


def _called_name(call: str) -> str:
    """The unqualified name a call's text calls (`ns::f<T>(x)` → `f`)."""
    head = call.split("(", 1)[0]
    head = re.sub(r"<.*", "", head)
    return head.split("::")[-1].strip()


def _macro_reading_grid(src: KernelSource) -> str | None:
    """Why a macro of the file the kernel uses would see the original block layout; None when none does."""
    used = {src.text(n) for n in src.in_body("identifier")}
    for m in _DEFINE.finditer(src.model.text):
        name, value = m.group(1), m.group(2)
        if name in used and (_GRID_READS.search(value) or _OTHER_AXES.search(value) or _BLOCK_WIDE.search(value)):
            return f"uses the macro {name}, which reads the block index, grid size or block shape itself"
    return None


def _helper_reading_grid(called: list[tuple[str, str]]) -> str | None:
    """Why a helper the kernel calls (`_called_helpers`) would see the original block layout (it reads the block
    index, grid size or other thread axes, or cooperates across the block); None when none does."""
    for name, text in called:
        if name == ALLREDUCE:  # row_reduce's reduction: the row's threads along x, its slots passed in (a barrier)
            continue
        if _GRID_READS.search(text) or _OTHER_AXES.search(text):
            return f"calls {name}, which reads the block index, grid size or block shape itself"
        if _HELPER_BLOCK_WIDE.search(text):
            return f"calls {name}, which makes the threads of a block cooperate"
    return None
