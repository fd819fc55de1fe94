"""Rows on the block's y axis numbered by a count of their own (`row = blockIdx.x * F + threadIdx.y`, F the most rows
a block may hold, while the launcher gives a small batch a block of fewer rows) read with the block's y axis moved
onto the grid: thread (x, y) of block b becomes thread x of block (b, y) of a (grid.x, block.y) grid, so `threadIdx.y`
is written `blockIdx.y` and `blockDim.y` `gridDim.y`. Every thread computes what it computed, whatever F and the launch
are (rows_on_y's `blockIdx.x * blockDim.y + threadIdx.y` needs F to be the block's y size), and row_reduce then reads
one row per block.

That holds where the rows of a block never meet, since only the block's rows are parted: the kernel (and the helpers
of the file it calls) reads no other axis of the grid (`blockIdx.y`, z) and no z of the block; uses no dynamic shared
memory, and each static `__shared__` array only as the row's own slice (`S[threadIdx.y]...`, rows_on_y's rule); makes
no block-wide vote (`__syncthreads_count`) or cooperative-groups call that reads the block as a whole (a barrier only
orders a row's own threads then); calls no function the file does not define but the CUDA intrinsics and math; and
where it exchanges values within warps (shuffles, votes, tiles), a warp is within one row: the block's x size a
multiple of 32 at every size of the spec, or without one in every launch of the kernel in the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tree_sitter import Node

from cutune.errors import CutuneError, TransformRefused
from cutune.spec import KernelSpec
from cutune.template.edits import EditList, apply_edits
from cutune.template.expr import compile_expr
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.recipes.host import HostResolver, launched_block_x
from cutune.template.variants.inline import _callee as callee
from cutune.template.variants.inline import _helpers as helpers
from cutune.template.variants.loops import index_form, local_values, sum_terms
from cutune.template.variants.rows_on_y import _array_name, _slice_index, warp_form

# the rewritten kernel's launch: a block per row of threads of the original's blocks, the original's own y and z
# (which the kernel never reads) on z
GRID = ("{grid.x}", "{block.y}", "({grid.y}) * ({grid.z})")
_MOVED = {"threadIdx.y": "blockIdx.y", "blockDim.y": "gridDim.y"}
# builtins that would see the grid's new y axis, or the block's z
_OTHER_AXES = re.compile(r"\b(?:blockIdx\.[yz]|gridDim\.[yz]|threadIdx\.z|blockDim\.z)\b")
_HELPER_Y = re.compile(r"\b(?:threadIdx\.y|blockDim\.y)\b|__shared__")  # in a helper, the y axis left as it was
_WHOLE = re.compile(r"\b(?:threadIdx|blockDim|blockIdx|gridDim)\b(?!\s*\.\s*[xyz])")  # the builtin as a whole dim3
# what makes the rows of a block meet: block-wide votes, the block as a cooperative group read as a whole
_BLOCK_WIDE = re.compile(
    r"\b(?:__syncthreads_(?:count|and|or)|thread_rank|num_threads|dim_threads|group_dim|size|meta_group_rank|"
    r"meta_group_size|block_rank)\s*\("
)
_DYNAMIC_SHARED = re.compile(r"\bextern\s+__shared__\b")
_WARP_LEVEL = re.compile(
    r"\b(?:__shfl\w*|shfl\w*|__ballot\w*|__any\w*|__all\w*|__match\w*|__reduce\w*|"
    r"tiled_partition|coalesced_threads|__activemask|__syncwarp)\b"
)
# functions a kernel may call that touch no other thread: CUDA intrinsics (the block-wide votes are read above),
# casts, vector constructors, math
PURE_CALLS = re.compile(
    r"__\w+|static_cast|reinterpret_cast|const_cast|make_\w+|(?:std::)?(?:min|max|abs|fabs|sqrt|rsqrt|exp|exp2|log|"
    r"log2|pow|tanh|erf|fma|floor|ceil|round|isnan|isinf)f?|fmaxf?|fminf?|this_thread_block|tiled_partition"
)


def rows_on_grid(src: KernelSource, spec: KernelSpec | None, transform: str) -> str | None:
    """The file's text with the kernel's y axis moved onto the grid (`threadIdx.y` written `blockIdx.y`, `blockDim.y`
    `gridDim.y`; launch it on GRID); None when no row is numbered `blockIdx.x * F + threadIdx.y`. Raises
    TransformRefused (as `transform`) naming what lets the rows of a block meet."""
    # the builtins may be spelled through locals (`const int ty = threadIdx.y;`): read as the builtins they hold
    builtins = {k: v for k, v in local_values(src).items() if re.fullmatch(r"(?:threadIdx|blockIdx)\.[xy]", v)}
    rows = [n for n in src.in_body("binary_expression") if _numbers_rows(src, n, builtins)]
    if not rows:
        return None
    line = src.line(rows[0])

    def refuse(why: str) -> TransformRefused:
        return TransformRefused(
            transform,
            f"numbers rows `blockIdx.x * F + threadIdx.y` (line {line}), but the block's rows may meet: {why}",
        )

    texts = [("the kernel", src.text(src.body))] + [(f"`{name}`", text) for name, text in _called(src, refuse)]
    for where, text in texts:
        for pattern, what in (
            (_OTHER_AXES, "reads another axis of the grid or the block's z"),
            (_WHOLE, "reads a builtin as a whole"),
            (_BLOCK_WIDE, "reads the block as a whole"),
            (_DYNAMIC_SHARED, "uses dynamic shared memory"),
        ):
            found = pattern.search(text)
            if found is not None:
                raise refuse(f"{where} {what} (`{found.group(0).rstrip('( ')}`)")
        if where != "the kernel" and (found := _HELPER_Y.search(text)) is not None:  # it would keep the block's y
            raise refuse(f"{where} reads `{found.group(0)}`")
    body_names = {src.text(n) for n in src.in_body("identifier")}
    for decl in descendants(src.root, "declaration"):
        if not any(src.text(c) == "__shared__" for c in decl.children):
            continue
        if _in_function(decl) and not src.body.start_byte <= decl.start_byte < src.body.end_byte:
            continue  # another function's
        if not src.body.start_byte <= decl.start_byte < src.body.end_byte:  # the file's: every block's own too
            named = [n for d in decl.children_by_field_name("declarator") if (n := _declared_name(d)) is not None]
            used = [n for n in named if n in body_names]
            if used:
                raise refuse(f"`{used[0]}` (line {src.line(decl)}), shared memory of the file, may be shared by them")
            continue
        for d in decl.children_by_field_name("declarator"):
            name = _array_name(d)
            uses = [
                n
                for n in src.in_body("identifier")
                if name is not None
                and src.text(n) == src.text(name)
                and not decl.start_byte <= n.start_byte < decl.end_byte
            ]
            if name is None or any(_slice_index(src, use, {"threadIdx.y"}) is None for use in uses):
                raise refuse(f"`{src.text(d)}` (line {src.line(decl)}) is shared by the block's rows")
    if any(_WARP_LEVEL.search(text) for _, text in texts) and not _whole_warps(src, spec):
        raise refuse(
            "warps exchange values, and neither the spec nor the launches in the file show a block whose x "
            "size is a multiple of 32 (a warp within one row)"
        )
    edits = EditList(src.data)
    for node in src.in_body("field_expression"):
        new = _MOVED.get(index_form(src.text(node)))
        if new is not None:
            edits.replace(node.start_byte, node.end_byte, new)
    return apply_edits(src.model.text, edits.edits)


def moved_spec(spec: KernelSpec) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The spec's grid and block for the rewritten kernel: GRID written with the spec's own expressions."""
    grid = [*spec.grid, "1", "1"][:3]
    block = [*spec.block, "1"][:2]
    return (grid[0], block[1], f"({grid[1]}) * ({grid[2]})"), (block[0],)


def _numbers_rows(src: KernelSource, node: Node, builtins: dict[str, str]) -> bool:
    """Whether `node` is a sum with a term `threadIdx.y` (times a row length) and one of blockIdx.x times a count
    other than the block's y size."""
    parent = node.parent
    if src.field(node, "operator") != "+" or (
        parent is not None and parent.type == "binary_expression" and src.field(parent, "operator") == "+"
    ):
        return False
    forms = [
        index_form(re.sub(r"\b[A-Za-z_]\w*\b(?!\s*\.)", lambda m: builtins.get(m.group(0), m.group(0)), src.text(t)))
        for t in sum_terms(src, node)
    ]
    y = any(f == "threadIdx.y" or f.startswith("threadIdx.y*") or f.endswith("*threadIdx.y") for f in forms)
    # a count of its own: rows_on_y reads `blockDim.y`, the block's rows, and says why where it cannot
    x = any(
        re.fullmatch(r"(?:blockIdx\.x\*.+|.+\*blockIdx\.x(?:\*.+)?)", f) and not re.search(r"threadIdx|blockDim\.y", f)
        for f in forms
    )
    return x and y


def _in_function(node: Node) -> bool:
    """Whether `node` lies in a function's definition."""
    parent = node.parent
    while parent is not None and parent.type != "function_definition":
        parent = parent.parent
    return parent is not None


def _declared_name(declarator: Node) -> str | None:
    """The name a declarator declares (`S` of `S[8]`, `extern __shared__ float S[];`), None where it is no name."""
    while declarator.type in ("array_declarator", "init_declarator", "pointer_declarator"):
        inner = declarator.child_by_field_name("declarator")
        if inner is None:
            return None
        declarator = inner
    return (
        declarator.text.decode("utf-8", errors="replace")
        if declarator.type == "identifier" and declarator.text
        else None
    )


def _called(src: KernelSource, refuse: Callable[[str], TransformRefused] | None = None) -> list[tuple[str, str]]:
    """The file's helpers the kernel calls, directly or through each other (name, text); with `refuse`, raises its
    error for a call of a function the file does not define that is not an intrinsic, a cast or math, or a method
    other than a warp exchange or a barrier."""
    defined = helpers(src)
    found: dict[str, str] = {}
    pending = [src.body]
    while pending:
        node = pending.pop()
        for call in descendants(node, "call_expression"):
            function = call.child_by_field_name("function")
            if function is not None and function.type == "field_expression":  # a method: a tile's, a group's
                method = src.field(function, "field")
                if refuse is not None and not (_WARP_LEVEL.fullmatch(method) or method == "sync"):
                    raise refuse(
                        f"calls the method `{method}` (line {src.line(call)}): it may read the block's y "
                        "axis or shared memory"
                    )
                continue
            name, scope = callee(src, call)
            qualified = f"{scope}::{name}" if scope else name
            if name in defined:
                if name not in found:
                    found[name] = "\n".join(src.text(h.definition) for h in defined[name])
                    pending += [h.definition for h in defined[name]]
            elif not name or not PURE_CALLS.fullmatch(
                qualified.removeprefix("cg::").removeprefix("cooperative_groups::")
            ):
                if refuse is None or _template_type(src, name):
                    continue  # a conversion to a template type (`T(v)`), or no refusal asked for
                raise refuse(
                    f"calls `{qualified or src.text(call)}` (line {src.line(call)}), which the file does not "
                    "define: it may read the block's y axis or shared memory"
                )
    return list(found.items())


def _template_type(src: KernelSource, name: str) -> bool:
    """Whether `name` is a type parameter of the kernel's template."""
    return bool(name) and src.template_param(name)


def warps_within_rows(src: KernelSource, spec: KernelSpec | None) -> bool:
    """Whether no warp of the kernel exchanges values across the block's rows on y: neither its body nor the file's
    helpers it calls make a warp-level exchange, or a warp lies within one row (the block's x size a multiple of 32,
    as `_whole_warps` reads it)."""
    texts = [src.text(src.body), *(text for _, text in _called(src))]
    return not any(_WARP_LEVEL.search(t) for t in texts) or _whole_warps(src, spec)


def _whole_warps(src: KernelSource, spec: KernelSpec | None) -> bool:
    """Whether the block's x size is a multiple of 32 wherever the kernel runs: the spec's at every size, or without
    a spec every launch of the kernel in the file."""
    if spec is not None and spec.block and spec.sizes:
        try:
            block = compile_expr(spec.block[0])
            return all(int(block.evaluate({**spec.scalar_values(z), **z})) % 32 == 0 for z in spec.sizes)
        except (CutuneError, ArithmeticError, KeyError, TypeError, ValueError):
            return False
    launches = launched_block_x(src)
    return bool(launches) and all(
        x is not None and _multiple_of_warp(HostResolver(src, call), x) for call, x in launches
    )


def _multiple_of_warp(resolver: HostResolver, node: Node, depth: int = 0) -> bool:
    """Whether a launch's expression is a multiple of 32 at every run: a value the host code fixes, the warp size by
    its usual names or a constant of the file, a product with such a factor, a choice between such, or a local
    holding one."""
    src = resolver.src
    value = resolver.resolve(node).value
    if value is not None or depth > 8:
        return value is not None and value % 32 == 0
    if node.type == "parenthesized_expression" and node.named_child_count == 1:
        return _multiple_of_warp(resolver, node.named_children[0], depth + 1)
    if node.type == "binary_expression" and src.field(node, "operator") == "*":
        return any(_multiple_of_warp(resolver, f, depth + 1) for f in _operands(node, "left", "right"))
    if node.type == "conditional_expression":
        branches = _operands(node, "consequence", "alternative")
        return len(branches) == 2 and all(_multiple_of_warp(resolver, b, depth + 1) for b in branches)
    text = "".join(src.text(node).split())
    if warp_form(text) == "32":
        return True
    constant = _file_constant(src, text)
    if constant is not None:
        return constant % 32 == 0
    found = resolver.declaration(text) if re.fullmatch(r"\w+", text) else None
    return found is not None and len(found[2]) == 1 and _multiple_of_warp(resolver, found[2][0], depth + 1)


def _operands(node: Node, *fields: str) -> list[Node]:
    """The children of `node` in `fields` that are present."""
    return [c for f in fields if (c := node.child_by_field_name(f)) is not None]


def launched_value(src: KernelSource, call: Node, x: Node) -> int | None:
    """The integer a launch's expression resolves to: through the host code, else a constant of the file
    (`constexpr int kWarp = 32;`, `#define WARPS 32`, namespace-qualified or not); None where neither tells."""
    value = HostResolver(src, call).resolve(x).value
    if value is not None:
        return value
    return _file_constant(src, "".join(src.text(x).split()))


def _file_constant(src: KernelSource, text: str) -> int | None:
    """The value of a constant of the file (`constexpr int kWarp = 32;`, `#define WARPS 32`) that `text` names,
    namespace-qualified or not; None where `text` is no name or names none."""
    qualified = re.fullmatch(r"(?:\w+::)*(\w+)", text)
    if qualified is None:
        return None
    name = qualified.group(1)
    found = re.search(
        rf"(?:constexpr\s+[\w:]+\s+{re.escape(name)}\s*=|#define\s+{re.escape(name)})\s*(\d+)\b", src.model.text
    )
    return int(found.group(1)) if found is not None else None
