"""Stride loops, read structurally from the syntax tree: `for (T i = START; i < BOUND; i += STEP) BODY`
where every thread starts at its own offset and steps by the number of threads that share the work:

- block-stride: START is `threadIdx.x`, STEP is `blockDim.x`;
- grid-stride: START is `blockIdx.x * blockDim.x + threadIdx.x` (any order), STEP is
  `blockDim.x * gridDim.x` (either order); or the same over the grid's y axis (`blockIdx.y`, `gridDim.y`),
  as a one-block-per-item kernel split over SPLIT blocks per item (split.py) writes it;

each possibly through a local declared from such an expression. Such a loop covers [0, BOUND) exactly
once over the threads of a block (or of the grid), whatever the launch's block (or grid) size.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.access import CASTS
from cutune.cuda.model import SourceModel, TemplateParamKind
from cutune.cuda.syntax import nested_scope
from cutune.errors import CutuneError, SourceError, TransformRefused
from cutune.template.edits import EditList, apply_edits
from cutune.template.expr import compile_expr
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.recipes.items_per_thread import _COOPERATION as COOPERATION
from cutune.template.variants.model import Launch

_BLOCK_START = {"threadIdx.x"}
_BLOCK_STEP = {"blockDim.x"}
_GRID_START = {
    axis: {
        f"{a}+threadIdx.x" if first else f"threadIdx.x+{a}"
        for a in (f"blockIdx.{axis}*blockDim.x", f"blockDim.x*blockIdx.{axis}")
        for first in (True, False)
    }
    for axis in ("x", "y")
}
_GRID_STEP = {axis: {f"blockDim.x*gridDim.{axis}", f"gridDim.{axis}*blockDim.x"} for axis in ("x", "y")}
_STATIC_CAST = re.compile(r"static_cast<[\w:]+>")
_CASTS = re.compile(r"^(?:static_cast<[^<>]*>|\((?:const\s+)?(?:unsigned\s+)?\w+\))")
_PRODUCT = re.compile(r"\((\w+\.[xyz]\*\w+\.[xyz])\)")  # `(blockIdx.x * blockDim.x) + threadIdx.x`
# a cast of a thread or block builtin (`(int64_t)blockIdx.x`, `int64_t(blockDim.x)`, `static_cast<size_t>(...)`):
# 64-bit index arithmetic, the same index
_BUILTIN = r"((?:blockIdx|blockDim|threadIdx|gridDim)\.[xyz])"
_BUILTIN_CASTS = re.compile(
    rf"static_cast<[^<>]*>\({_BUILTIN}\)|\((?:const)?(?:unsigned|signed)?(?:long)*\w*\){_BUILTIN}"
    rf"|\b(?:unsigned|int|long|size_t|u?int(?:32|64)_t)\({_BUILTIN}\)|\({_BUILTIN}\)"
)
# the spec's block divided by BLOCK_DIV, never below a warp (nor above the original)
BLOCK_DIVIDED = "max(min(warp_size, {block}), {block} / BLOCK_DIV)"
# the spec's grid divided by GRID_DIV, at least one block
GRID_DIVIDED = "max(1, ceil_div({grid}, GRID_DIV))"
# the signed integer types, by their bits (index arithmetic the canonical forms and transforms reason about)
SIGNED_WIDTH = {
    "int": 32,
    "signed": 32,
    "signed int": 32,
    "int32_t": 32,
    "long": 64,
    "long int": 64,
    "long long": 64,
    "long long int": 64,
    "signed long": 64,
    "signed long long": 64,
    "int64_t": 64,
    "ptrdiff_t": 64,
}
# the unsigned ones, likewise
UNSIGNED_WIDTH = {
    "unsigned": 32,
    "unsigned int": 32,
    "uint": 32,
    "uint32_t": 32,
    "unsigned long": 64,
    "unsigned long long": 64,
    "uint64_t": 64,
    "size_t": 64,
}
_EXITS = ("break_statement", "return_statement", "goto_statement")
BREAKABLE = ("for_statement", "for_range_loop", "while_statement", "do_statement", "switch_statement")
# the ceiling division helpers libraries write (`ceil_div`, `div_up`, `cdiv`, `DIVUP`), by name
CEIL_DIV = re.compile(r"(?:\w+::)*\w*(?:ceil\w*div|div\w*up|cdiv)\w*", re.IGNORECASE)
# integer helpers whose value is a function of their arguments alone: those and the rounding ones (`round_up`)
ARITHMETIC = re.compile(
    rf"(?:\w+::)*(?:u?min|u?max)|{CEIL_DIV.pattern}|(?:\w+::)*\w*(?:round|align)\w*up\w*", re.IGNORECASE
)


@dataclass(frozen=True)
class CountingLoop:
    """`for (T i = start; i < bound; i += step) body`: the loop shape several canonical forms start from."""

    index: str
    index_type: str  # T as written, `const` dropped
    start: Node
    bound: Node
    step: Node
    body: Node


def static_cast_call(src: KernelSource, call: Node) -> bool:
    """Whether `call` is a `static_cast<T>(x)`: a conversion, which computes like the arithmetic around it."""
    return _STATIC_CAST.fullmatch("".join(src.field(call, "function").split())) is not None


def single_declaration(node: Node | None) -> tuple[Node, Node] | None:
    """For a declaration of one plain variable with a value (`T name = value;`): the name's and the value's nodes."""
    if node is None or node.type != "declaration":
        return None
    declarators = node.children_by_field_name("declarator")
    if len(declarators) != 1 or declarators[0].type != "init_declarator":
        return None
    name, value = declarators[0].child_by_field_name("declarator"), declarators[0].child_by_field_name("value")
    if name is None or value is None or name.type != "identifier":
        return None
    return name, value


def whole_subscript(ident: Node) -> bool:
    """Whether `ident` is a subscript's whole index (`a[ident]`)."""
    indices = ident.parent
    inside = [c for c in indices.named_children if c.type != "comment"] if indices is not None else []
    return (
        indices is not None
        and indices.type == "subscript_argument_list"
        and len(inside) == 1
        and inside[0].start_byte == ident.start_byte
    )


def counting_loop(src: KernelSource, loop: Node) -> CountingLoop | None:
    """The loop as a CountingLoop when it declares one index, bounds it with `<` and steps it with `+=`."""
    init, cond, update = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    body = loop.child_by_field_name("body")
    declared = single_declaration(init)
    if init is None or cond is None or update is None or body is None or declared is None:
        return None
    name, start = declared
    index = src.text(name)
    bound, step = cond.child_by_field_name("right"), update.child_by_field_name("right")
    if cond.type != "binary_expression" or update.type != "assignment_expression" or bound is None or step is None:
        return None
    if (src.field(cond, "operator"), src.field(update, "operator")) != ("<", "+="):
        return None
    if src.field(cond, "left").strip() != index or src.field(update, "left").strip() != index:
        return None
    index_type = " ".join(re.sub(r"\bconst\b", " ", src.text(init)[: name.start_byte - init.start_byte]).split())
    return CountingLoop(index, index_type, start, bound, step, body)


@dataclass(frozen=True)
class StrideLoop:
    """A block- or grid-stride loop of a kernel, with the texts of its parts."""

    node: Node  # the for_statement
    var: str
    var_type: str
    start: str
    step: str
    bound: str
    body: Node
    grid_stride: bool
    axis: str = "x"  # the grid axis a grid-stride loop strides over


def kernel_source(transform: str, model: SourceModel, kernel: str) -> KernelSource:
    """The kernel to rewrite; TransformRefused when tree-sitter could not read its definition."""
    k = model.kernel(kernel)
    if k.has_errors:
        raise TransformRefused(transform, "the kernel has syntax errors tree-sitter could not parse")
    try:
        return KernelSource(model, k)
    except SourceError:
        raise TransformRefused(transform, "the kernel's definition could not be read") from None


def required_stride_loops(transform: str, src: KernelSource) -> list[StrideLoop]:
    """The kernel's stride loops; TransformRefused (saying why each `for` is not one) when it has none."""
    loops, reasons = stride_loops(src)
    if not loops:
        why = "; ".join(reasons) if reasons else "the kernel has no for loop"
        raise TransformRefused(transform, f"no block- or grid-stride loop ({why})")
    return loops


def grid_loops_x(src: KernelSource) -> list[StrideLoop]:
    """The kernel's grid-stride loops over the grid's x axis."""
    return [lp for lp in stride_loops(src)[0] if lp.grid_stride and lp.axis == "x"]


def grid_blocker(src: KernelSource) -> str | None:
    """Why the kernel's result may depend on the size of its grid: the block index or grid size read outside the
    headers of its x grid-stride loops (and the locals that hold their starts or strides), or such a loop whose
    iterations cannot move between threads (loop_blockers); None when any grid covers the same work."""
    grid_loops = grid_loops_x(src)
    headers = [(lp.node.start_byte, lp.body.start_byte) for lp in grid_loops]
    # a local that holds a loop's start or stride (`const long stride = blockDim.x * gridDim.x;`) is header too
    names = {squeezed(t) for lp in grid_loops for t in (lp.start, lp.step)}
    for d in src.in_body("init_declarator"):
        target = d.child_by_field_name("declarator")
        if target is not None and src.text(target) in names:
            headers.append((d.start_byte, d.end_byte))
    for node in src.in_body("identifier"):
        if src.text(node) in ("blockIdx", "gridDim") and not any(a <= node.start_byte < b for a, b in headers):
            return (
                f"{src.text(node.parent or node)} is read outside the grid-stride loop headers "
                f"(line {src.line(node)}): the grid carries meaning beyond the loop"
            )
    for lp in grid_loops:  # another grid gives another thread each index: what differs between threads must not matter
        blocker = loop_blockers(src, lp)
        if blocker is not None:
            return f"the loop at line {src.line(lp.node)} {blocker}"
    return None


def divided_launch(
    src: KernelSource, loops: list[StrideLoop], prefix: str, what: str
) -> tuple[list[TunableParam], Launch | None]:
    """The launch parameters of a variant that rewrote `loops` so each thread may do more of the work: fewer
    threads per block (`{prefix}BLOCK_DIV`) where any block size covers the same work (block_free), fewer blocks
    (`{prefix}GRID_DIV`) where the loops are grid-stride and any grid covers the same work (grid_blocker); None
    where neither, or where the loops' iterations cannot move between threads, as fewer threads make them."""
    if any(loop_blockers(src, lp) is not None for lp in loops):
        return [], None
    params: list[TunableParam] = []
    grid, block = "{grid}", "{block}"
    if block_free(src, loops):
        why = f"threads per block divided by{what}"
        params.append(TunableParam(f"{prefix}BLOCK_DIV", (1, 2, 4, 8), 1, Binding.LAUNCH, description=why))
        block = BLOCK_DIVIDED.replace("BLOCK_DIV", f"{prefix}BLOCK_DIV")
    if all(lp.grid_stride and lp.axis == "x" for lp in loops) and grid_blocker(src) is None:
        why = f"blocks divided by{what}"
        params.append(TunableParam(f"{prefix}GRID_DIV", (1, 2, 4, 8, 16, 32), 1, Binding.LAUNCH, description=why))
        grid = GRID_DIVIDED.replace("GRID_DIV", f"{prefix}GRID_DIV")
    return params, (Launch(grid=(grid,), block=(block,)) if params else None)


def edited_body(src: KernelSource, edits: EditList) -> str:
    """The kernel's body, without its braces, with `edits` (all inside the body) applied."""
    text = apply_edits(src.model.text, edits.edits).encode("utf-8")
    shift = len(text) - len(src.data)
    return text[src.body.start_byte + 1 : src.body.end_byte - 1 + shift].decode("utf-8")


def stride_loops(src: KernelSource) -> tuple[list[StrideLoop], list[str]]:
    """The kernel's stride loops (outermost first), and why each other `for` loop is not one."""
    locals_ = local_values(src)
    found: list[StrideLoop] = []
    reasons: list[str] = []
    for loop in src.in_body("for_statement"):
        if any(f.node.start_byte <= loop.start_byte < f.node.end_byte for f in found):
            continue  # nested in a stride loop already found
        result = _stride_loop(src, loop, locals_)
        if isinstance(result, str):
            reasons.append(f"the loop at line {src.line(loop)} {result}")
        else:
            found.append(result)
    return found, reasons


def loop_blockers(src: KernelSource, loop: StrideLoop, *, regrouped: bool = True) -> str | None:
    """Why the loop's iterations cannot be regrouped among threads: an exit, cooperation, a write to the loop
    variable or its bound, or a read of what differs between threads (threadIdx.x, a pointer moved by it); None when
    they can. A rewrite that keeps each thread's own iterations in their order (not `regrouped`) is not blocked by
    the last: what differs between threads is then read by the same thread for the same index as before."""
    for node in descendants(loop.body, *_EXITS):
        if node.type == "break_statement" and nested_scope(node, loop.body) is not None:  # an inner loop's or switch's
            continue
        return f"leaves the loop early (line {src.line(node)})"
    for node in descendants(loop.body, "identifier", "namespace_identifier", "type_qualifier"):
        if COOPERATION.fullmatch(src.text(node)) or src.text(node) == "cub":
            return f"has threads cooperate through {src.text(node)} (line {src.line(node)})"
    bound_names = set(re.findall(r"[A-Za-z_]\w*", loop.bound))
    for name in written_names(src, loop.body):
        if name == loop.var:
            return f"changes its index {loop.var} inside the body"
        if name in bound_names:
            return f"changes {name}, which its bound reads, inside the body"
    declared = declared_names(src, loop.body)
    if bound_names & declared:
        return f"has a bound that reads {sorted(bound_names & declared)[0]}, declared inside the body"
    if not regrouped:
        return None
    for name in sorted(written_names(src, loop.body) - declared - {loop.var}):
        if sets_first(src, loop.body, name):
            continue  # each iteration's own value
        read = next(
            (n for n in descendants(loop.body, "identifier") if src.text(n) == name and not _updates(src, n)), None
        )
        if read is not None:  # more than a running total (`acc += e`): a pointer moved each iteration, a count used
            return (
                f"carries `{name}` from one iteration to the next (line {src.line(read)}): an iteration reads what "
                "the thread's earlier ones left, so another grouping of the iterations reads other values"
            )
    for name, read in _aggregates_read(src, loop.body, declared):
        return (
            f"carries `{name}` from one iteration to the next (line {src.line(read)}): an iteration writes part of it "
            "and reads it, so it may read what the thread's earlier iterations left"
        )
    dependent = _thread_dependent_names(src) - {loop.var} - declared  # the loop's own names shadow others
    for node in descendants(loop.body, "identifier"):
        along_x = node.parent is not None and squeezed(src.text(node.parent)) == "threadIdx.x"
        if along_x or src.text(node) in dependent:
            what = "threadIdx.x" if along_x else f"{src.text(node)}, which differs between threads"
            return f"reads {what} in its body (line {src.line(node)}): which thread runs an iteration matters"
    return None


def _aggregates_read(src: KernelSource, body: Node, own: set[str]) -> list[tuple[str, Node]]:
    """The kernel's local arrays and structs declared outside the loop (not pointers, not `__shared__`) of which an
    iteration writes a part (`buf[j] = v`, `s.x += v`) and reads any: each with the first read."""
    local: dict[str, int | None] = {}  # name → its length, for an array of a constant one
    for d in descendants(src.body, "declaration"):
        if d.start_byte >= body.start_byte and d.end_byte <= body.end_byte:
            continue
        if any(src.text(c) == "__shared__" for c in d.children) or "static" in src.text(d).split("=")[0].split():
            continue
        for target in d.children_by_field_name("declarator"):
            inner = target.child_by_field_name("declarator") if target.type == "init_declarator" else target
            named = declared_identifier(target)
            if inner is not None and inner.type in ("array_declarator", "identifier") and named is not None:
                size = src.field(inner, "size") if inner.type == "array_declarator" else ""
                local[src.text(named)] = constant_value(src, size) if size else None
    written: dict[str, list[Node]] = {}
    for n in descendants(body, "assignment_expression", "update_expression"):
        assigned = n.child_by_field_name("left") or n.child_by_field_name("argument")
        root = assigned
        while root is not None and root.type in ("subscript_expression", "field_expression"):
            root = root.child_by_field_name("argument")
        if assigned is not None and root is not None and assigned != root and root.type == "identifier":
            name = src.text(root)
            if name in local and name not in own:
                written.setdefault(name, []).append(root)
    found_reads = []
    for name, roots in written.items():
        if _filled_first(src, body, name, local[name]):
            continue  # each iteration's own array
        reads = (n for n in descendants(body, "identifier") if src.text(n) == name and n not in roots)
        read = next((n for n in reads if not _updates_part(src, n)), None)
        if read is not None:
            found_reads.append((name, read))
    return found_reads


def _filled_first(src: KernelSource, body: Node, name: str, length: int | None) -> bool:
    """Whether the loop body's first statements that name the array `name` set each of its `length` elements at a
    constant index (`m[0] = a; m[1] = b;`, values not reading it) before anything else names it."""
    filled: set[int] = set()
    for statement in _naming(src, body, name) if length is not None else []:
        expr = statement.named_children[0] if statement.type == "expression_statement" else None
        left = expr.child_by_field_name("left") if expr is not None and expr.type == "assignment_expression" else None
        right = expr.child_by_field_name("right") if expr is not None else None
        index = (
            src.field(left, "indices").strip("[] ") if left is not None and left.type == "subscript_expression" else ""
        )
        at = constant_value(src, index) if index else None
        if (
            expr is None
            or left is None
            or right is None
            or src.field(expr, "operator") != "="
            or src.field(left, "argument") != name
            or at is None
            or any(src.text(i) == name for i in descendants(right, "identifier"))
        ):
            break
        filled.add(at)
    return length is not None and filled >= set(range(length))


def _updates_part(src: KernelSource, ident: Node) -> bool:
    """Whether the identifier's part (`sums[c]`, `s.x`) is read in an update of that same part
    (`sums[c] = fmaf(a, w, sums[c])`, `s.x += v`): one of an array's running totals."""
    part = ident
    while part.parent is not None and part.parent.type in ("subscript_expression", "field_expression"):
        if part.parent.child_by_field_name("argument") != part:
            break
        part = part.parent
    node: Node | None = part
    while node is not None and not node.type.endswith("statement"):
        if node.type in ("assignment_expression", "update_expression"):
            target = node.child_by_field_name("left") or node.child_by_field_name("argument")
            return target is not None and squeezed(src.text(target)) == squeezed(src.text(part))
        node = node.parent
    return False


# calls that take the larger or smaller of two values, and fused multiply-adds (`fmaf(x, y, acc)` adds x·y to acc)
EXTREMUM_CALLS = {"fmaxf": "max", "fmax": "max", "max": "max", "fminf": "min", "fmin": "min", "min": "min"}
FMA_CALLS = {"fma", "fmaf", "__fmaf_rn", "__fma_rn", "std::fma"}


def update_op(src: KernelSource, node: Node, name: str) -> str | None:
    """The reduction an update of `name` makes (`acc += e`, `acc = acc + e`, `acc = fmaxf(acc, e)`,
    `acc = fmaf(x, y, acc)`: "sum", "max" or "min"; `n++`, `p *= e`, `m |= e`: "count", "product", "bits";
    `acc = op(acc, e)` with the operator the kernel's block reduction takes: "combine"), e never reading `name`; None
    for any other update (`h = h * 31 + e`: its value depends on the order of the elements)."""

    def reads(n: Node | None) -> bool:
        return n is not None and any(src.text(i) == name for i in descendants(n, "identifier"))

    if node.type == "update_expression":
        return "count"
    op, right = src.field(node, "operator"), node.child_by_field_name("right")
    if node.type != "assignment_expression" or right is None:
        return None
    compound = {"+=": "sum", "-=": "sum", "*=": "product", "|=": "bits", "&=": "bits", "^=": "bits"}
    if op in compound:
        return compound[op] if not reads(right) else None
    if op != "=":
        return None
    if right.type == "binary_expression" and src.field(right, "operator") == "+":
        sides = [right.child_by_field_name("left"), right.child_by_field_name("right")]
        alone = [s is not None and squeezed(src.text(s)) == name for s in sides]
        return "sum" if alone.count(True) == 1 and sum(reads(s) for s in sides) == 1 else None
    if right.type == "call_expression":
        function = squeezed(src.field(right, "function")).removeprefix("::")
        arguments = right.child_by_field_name("arguments")
        args = [a for a in arguments.named_children if a.type != "comment"] if arguments is not None else []
        alone = [squeezed(src.text(a)) == name for a in args]
        if function in EXTREMUM_CALLS and len(args) == 2 and alone.count(True) == 1 and sum(map(reads, args)) == 1:
            return EXTREMUM_CALLS[function]
        if function in FMA_CALLS and len(args) == 3 and alone[2] and not any(map(reads, args[:2])):
            return "sum"  # a product added to the total, rounded once
        if len(args) == 2 and alone.count(True) == 1 and sum(map(reads, args)) == 1 and _reduces_with(src, function):
            return "combine"  # the operator the kernel's block reduction takes: one whatever the grouping
    return None


def _reduces_with(src: KernelSource, function: str) -> bool:
    """Whether the kernel hands `function` to a reduction as its operator (`BlockReduce(...).Reduce(v, op)`)."""
    for call in src.in_body("call_expression"):
        callee = src.field(call, "function")
        arguments = call.child_by_field_name("arguments")
        args = [a for a in arguments.named_children if a.type != "comment"] if arguments is not None else []
        if (
            re.search(r"\.\s*(?:Reduce|AllReduce)\s*$", callee)
            and len(args) == 2
            and squeezed(src.text(args[1])) == function
        ):
            return True
    return False


def _updates(src: KernelSource, ident: Node) -> bool:
    """Whether the identifier lies in an update of itself that totals the elements whatever their order (update_op:
    `acc += e`, `acc = fmaxf(acc, e)`, `n++`), or in the condition of an `if` that only then sets it
    (`if (v > m) { m = v; at = i; }`: a running extremum)."""
    name = src.text(ident)
    node: Node | None = ident
    while node is not None and not node.type.endswith("statement"):
        if node.type in ("assignment_expression", "update_expression"):
            target = node.child_by_field_name("left") or node.child_by_field_name("argument")
            if target == ident and src.field(node, "operator") == "=":
                return True  # set, not read
            own = target is not None and target.type == "identifier" and src.text(target) == name
            return own and update_op(src, node, name) is not None  # a total whatever the order of the elements
        parent = node.parent
        if parent is not None and parent.type == "if_statement" and parent.child_by_field_name("condition") == node:
            then = parent.child_by_field_name("consequence")
            return (
                then is not None
                and name in written_names(src, then)
                and parent.child_by_field_name("alternative") is None
            )
        node = parent
    return False


def _thread_dependent_names(src: KernelSource) -> set[str]:
    """The names that differ between a block's threads along x, set outside any loop: declared from `threadIdx.x` or
    from such names (a local `lane`), moved by them (`p += threadIdx.x`), or set through their address by a call
    that reads them (`curand_init(seed, idx, 0, &state)`: a random state per thread). Read in a stride loop's body,
    they make an iteration's work depend on the thread that runs it. (Locals set inside an enclosing loop, a
    persistent row loop's, are not followed.)"""
    sets: list[tuple[str, Node]] = []
    for n in src.in_body("init_declarator", "assignment_expression", "call_expression"):
        if _in_loop(n):
            continue  # a loop's own locals and indices: scoped to it, or set per iteration
        if n.type == "call_expression":  # each `&name` argument is set from the call's other arguments
            args = n.child_by_field_name("arguments")
            for arg in args.named_children if args is not None else ():
                operand = arg.child_by_field_name("argument") if arg.type == "pointer_expression" else None
                if operand is not None and operand.type == "identifier" and src.field(arg, "operator") == "&":
                    sets.append((src.text(operand), n))
            continue
        if n.type == "assignment_expression" and src.field(n, "operator") not in ("+=", "-="):
            continue  # a later plain assignment (a reduced total) is read only after the loops that accumulate it
        target = n.child_by_field_name("declarator" if n.type == "init_declarator" else "left")
        value = n.child_by_field_name("value" if n.type == "init_declarator" else "right")
        if target is not None and value is not None and target.type == "identifier":
            sets.append((src.text(target), value))
    names: set[str] = set()
    grew = True
    while grew:
        grew = False
        for name, value in sets:
            reads = {src.text(i) for i in descendants(value, "identifier")}
            along_x = any(squeezed(src.text(f)) == "threadIdx.x" for f in descendants(value, "field_expression"))
            if name not in names and (along_x or reads & names):
                names.add(name)
                grew = True
    return names


def _in_loop(node: Node) -> bool:
    """Whether `node` lies in a loop (its header or body)."""
    parent = node.parent
    while parent is not None and parent.type != "function_definition":
        if parent.type in ("for_statement", "while_statement", "do_statement", "for_range_loop"):
            return True
        parent = parent.parent
    return False


def block_free(src: KernelSource, loops: list[StrideLoop]) -> bool:
    """Whether no thread index or block size is read outside the given loops' headers, and threads never
    cooperate: then any block size covers the same work."""
    headers = [(lp.node.start_byte, lp.body.start_byte) for lp in loops]
    for node in src.in_body("identifier", "namespace_identifier", "type_qualifier"):
        text = src.text(node)
        if COOPERATION.fullmatch(text) or text == "cub":
            return False
        if text in ("threadIdx", "blockDim") and not any(a <= node.start_byte < b for a, b in headers):
            return False
    return True


def written_names(src: KernelSource, node: Node) -> set[str]:
    """The plain variables assigned, incremented or decremented under `node`."""
    names: set[str] = set()
    for n in descendants(node, "assignment_expression", "update_expression"):
        target = (
            n.child_by_field_name("left") if n.type == "assignment_expression" else n.child_by_field_name("argument")
        )
        if target is not None and target.type == "identifier":
            names.add(src.text(target))
    return names


def sets_first(src: KernelSource, body: Node, name: str) -> bool:
    """Whether the first statement of a loop's `body` that names `name` sets it whole, whatever the conditions
    (`v.load(p)`, `v.fill(x)`, `v = e` with `e` not reading it): each iteration's own value, whatever came before."""

    def names(node: Node | None) -> bool:
        return node is not None and any(src.text(i) == name for i in descendants(node, "identifier"))

    for statement in _naming(src, body, name):
        if statement.type == "if_statement":  # set on every path: in each branch, under a condition not reading it
            branches = [statement.child_by_field_name(f) for f in ("consequence", "alternative")]
            if names(statement.child_by_field_name("condition")) or branches[1] is None:
                return False
            return all(b is not None and sets_first(src, _branch(b), name) for b in branches)
        expr = statement.named_children[0] if statement.type == "expression_statement" else None
        if expr is None or expr.type not in ("call_expression", "assignment_expression"):
            return False
        if expr.type == "call_expression":
            function, args = expr.child_by_field_name("function"), expr.child_by_field_name("arguments")
            return (
                function is not None
                and function.type == "field_expression"
                and squeezed(src.field(function, "argument")) == name
                and re.search(r"load|fill", src.field(function, "field"), re.IGNORECASE) is not None
                and not names(args)
            )
        return (
            src.field(expr, "operator") == "="
            and squeezed(src.field(expr, "left")) == name
            and not names(expr.child_by_field_name("right"))
        )
    return False


def _naming(src: KernelSource, body: Node, name: str) -> Iterator[Node]:
    """The statements of a loop's body that name `name`, in the order they run (a plain block's own statements in
    its place: it runs whenever the body does)."""
    pending = statements_of(body)
    while pending:
        statement = pending.pop(0)
        if statement.type == "compound_statement":
            pending[:0] = statements_of(statement)
        elif any(src.text(i) == name for i in descendants(statement, "identifier")):
            yield statement


def _branch(node: Node) -> Node:
    """An `if`'s branch as a statement: an `else` clause's statement (the grammar wraps it)."""
    if node.type == "else_clause":
        return next(iter(node.named_children), node)
    return node


def declared_names(src: KernelSource, node: Node) -> set[str]:
    """The names declared under `node` (every declarator of a declaration: `float c, s;`)."""
    return {n for d in descendants(node, "init_declarator", "declaration") for n in declaration_names(src, d)}


def declaration_names(src: KernelSource, declaration: Node) -> list[str]:
    """The names one declaration declares, in order (`int a = 1, b[4], &r = a;` declares a, b and r)."""
    found = (declared_identifier(d) for d in declaration.children_by_field_name("declarator"))
    return [src.text(i) for i in found if i is not None]


def declared_identifier(declarator: Node) -> Node | None:
    """The identifier a declarator (`x = v`, `*p`, `&r`, `a[n]`) declares."""
    node: Node | None = declarator
    while node is not None and node.type != "identifier":
        inner = node.child_by_field_name("declarator")
        if inner is None and node.type == "reference_declarator":  # the grammar names no field there
            inner = next(iter(node.named_children), None)
        node = inner
    return node


def indented(text: str, indent: str) -> str:
    """Generated or copied code re-indented: a copied block's closing-brace indent (else none) becomes
    `indent` on every line; preprocessor and blank lines stay as they are."""
    lines = text.split("\n")
    last = lines[-1]
    common = len(last) - len(last.lstrip()) if len(lines) > 1 and last.strip() in ("}", "};") else 0

    def shifted(line: str) -> str:
        if not line.strip() or line.lstrip().startswith("#"):
            return line
        return indent + line[min(common, len(line) - len(line.lstrip())) :]

    return "\n".join([indent + lines[0].lstrip()] + [shifted(ln) for ln in lines[1:]])


def line_indent(data: bytes, at: int) -> str:
    """The leading whitespace of the line holding byte `at`."""
    start = data.rfind(b"\n", 0, at) + 1
    end = start
    while end < len(data) and data[end] in b" \t":
        end += 1
    return data[start:end].decode("utf-8")


def touches_memory(src: KernelSource, node: Node, pure: re.Pattern[str] | None = None) -> bool:
    """Whether `node` reads or writes memory or calls: a subscript, a dereference, `->`, or a call other than a cast
    (and than a callee `pure` matches, where given)."""
    for n in descendants(node, "subscript_expression", "call_expression", "pointer_expression", "field_expression"):
        if n.type == "subscript_expression" or (n.type == "pointer_expression" and src.text(n).startswith("*")):
            return True
        if n.type == "field_expression" and "->" in src.text(n):
            return True
        if n.type == "call_expression":
            callee = "".join(src.field(n, "function").split())
            if callee.split("<")[0] not in CASTS and not (
                pure is not None and pure.fullmatch(re.sub(r"<.*>$", "", callee))
            ):
                return True
    return False


def squeezed(text: str) -> str:
    """Text without whitespace, outer parentheses or leading integer casts (for comparing index forms)."""
    text = "".join(text.split())
    while True:
        stripped = _CASTS.sub("", text)
        if stripped.startswith("(") and stripped.endswith(")") and balanced(stripped[1:-1]):
            stripped = stripped[1:-1]
        if stripped == text:
            return text
        text = stripped


def balanced(text: str) -> bool:
    depth = 0
    for c in text:
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth < 0:
            return False
    return depth == 0


def _integer_macros(src: KernelSource) -> dict[str, str]:
    """The file's object-like macros whose values are integer arithmetic over literals and names (no member, no
    call): name → value."""
    return {
        m.name: m.value
        for m in src.model.macros
        if re.fullmatch(r"[\w\s()*+\-/%<>&|^~]*", m.value)
        and not re.search(rf"#\s*define\s+{re.escape(m.name)}\(", src.model.text)  # not function-like
    }


def constant_names(src: KernelSource) -> set[str]:
    """The names a constant expression of the kernel may use: its value template parameters, and the file's
    object-like macros of integer arithmetic over literals and such names."""
    names = {p.name for p in src.kernel.template_params if p.kind is TemplateParamKind.VALUE}
    macros = _integer_macros(src)
    grown = True
    while grown:
        found = {n for n, v in macros.items() if n not in names and set(re.findall(r"\b[A-Za-z_]\w*", v)) <= names}
        names |= found
        grown = bool(found)
    return names


def macros_expanded(src: KernelSource, text: str) -> str:
    """`text` with the file's integer macros written out (macros of macros too, a few deep)."""
    macros = _integer_macros(src)
    for _ in range(8):
        expanded = re.sub(
            r"\b[A-Za-z_]\w*", lambda m: f"({macros[m.group(0)]})" if m.group(0) in macros else m.group(0), text
        )
        if expanded == text:
            break
        text = expanded
    return text


def constant_value(src: KernelSource, text: str) -> int | None:
    """The value of `text` over integer literals and the file's integer macros; None where it names anything else."""
    try:
        return int(compile_expr(macros_expanded(src, text)).evaluate({}))
    except (CutuneError, ArithmeticError, KeyError, TypeError, ValueError):
        return None


def local_values(src: KernelSource) -> dict[str, str]:
    """Locals of the kernel body declared once with a value (name → squeezed value), for START and STEP."""
    values: dict[str, str] = {}
    for d in src.in_body("init_declarator"):
        name, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
        if name is not None and value is not None and name.type == "identifier":
            values[src.text(name)] = squeezed(src.text(value))
    written = written_names(src, src.body)
    return {k: v for k, v in values.items() if k not in written}


def _stride_loop(src: KernelSource, loop: Node, locals_: dict[str, str]) -> StrideLoop | str:
    init, cond, update = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    body = loop.child_by_field_name("body")
    if init is None or cond is None or update is None or body is None:
        return "lacks an initializer, a condition or an update"
    declarators = init.children_by_field_name("declarator") if init.type == "declaration" else []
    if len(declarators) != 1 or declarators[0].type != "init_declarator":
        return "does not declare exactly one index in its initializer"
    name_node, value = declarators[0].child_by_field_name("declarator"), declarators[0].child_by_field_name("value")
    if name_node is None or value is None or name_node.type != "identifier":
        return "does not declare a plain index"
    var = src.text(name_node)
    var_type = src.text(init)[: name_node.start_byte - init.start_byte].strip()
    if re.fullmatch(r"(?:const\s+)?auto", var_type):  # the rewrites name the index's type (casts, new loops)
        var_type = f"decltype({src.text(value).strip()})"
    if (
        cond.type != "binary_expression"
        or src.field(cond, "operator") != "<"
        or squeezed(src.field(cond, "left")) != var
    ):
        return f"does not test `{var} < bound`"
    if (
        update.type != "assignment_expression"
        or src.field(update, "operator") != "+="
        or src.field(update, "left") != var
    ):
        return f"does not step by `{var} += stride`"
    start, step = _resolved(src.text(value), locals_), _resolved(src.field(update, "right"), locals_)
    axes = stride_axes(start, step)
    if axes is None:
        stride = src.field(update, "right")
        return f"starts at `{src.text(value)}` and steps by `{stride}`: not a block- or grid-stride loop"
    return StrideLoop(
        loop,
        var,
        var_type,
        src.text(value),
        src.field(update, "right"),
        src.field(cond, "right"),
        body,
        grid_stride=bool(axes),
        axis=axes[0] if axes else "x",
    )


def index_form(text: str) -> str:
    """The squeezed text with casts of thread and block builtins taken out (for comparing index forms)."""
    text = _PRODUCT.sub(r"\1", "".join(text.split()))
    while (stripped := _BUILTIN_CASTS.sub(lambda m: next(g for g in m.groups() if g), text)) != text:
        text = stripped
    return squeezed(text)


def stride_axes(start: str, step: str) -> list[str] | None:
    """For a start and step in index form: the grid axes they stride over ([] for a block-stride pair), or None
    when they are no stride pair."""
    axes = [a for a in _GRID_START if start in _GRID_START[a] and step in _GRID_STEP[a]]
    return axes if axes or (start in _BLOCK_START and step in _BLOCK_STEP) else None


def grid_index_axis(text: str) -> str | None:
    """The grid axis of a global thread index `blockIdx.A * blockDim.x + threadIdx.x` (any order, casts), or None."""
    form = index_form(text)
    return next((axis for axis, starts in _GRID_START.items() if form in starts), None)


def _resolved(text: str, locals_: dict[str, str]) -> str:
    """The index form of the text, or of the value of the local it names."""
    s = index_form(text)
    return index_form(locals_.get(s, s))


def sum_terms(src: KernelSource, node: Node) -> list[Node]:
    """The terms of a sum, through nested sums and parentheses."""
    if node.type == "parenthesized_expression" and node.named_child_count == 1:
        return sum_terms(src, node.named_children[0])
    if node.type == "binary_expression" and src.field(node, "operator") == "+":
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is not None and right is not None:
            return [*sum_terms(src, left), *sum_terms(src, right)]
    return [node]


def statements_of(node: Node) -> list[Node]:
    """A compound statement's statements, or the one statement."""
    if node.type == "compound_statement":
        return [c for c in node.named_children if c.type != "comment"]
    return [node]


def rewritten(src: KernelSource, node: Node, edit: Callable[[Node], str | None]) -> str:
    """The node's text with each outermost descendant `edit` gives new text for replaced."""
    new = edit(node)
    if new is not None:
        return new
    if not node.children:
        return src.text(node)
    parts: list[str] = []
    at = node.start_byte
    for child in node.children:
        parts.append(src.data[at : child.start_byte].decode("utf-8"))
        parts.append(rewritten(src, child, edit))
        at = child.end_byte
    parts.append(src.data[at : node.end_byte].decode("utf-8"))
    return "".join(parts)


def with_pragma(src: KernelSource, loop: Node) -> int:
    """Where the loop's text starts, a `#pragma unroll` right before it included (it must stay on a loop)."""
    previous = loop.prev_named_sibling
    if previous is not None and previous.type in ("preproc_call", "preproc_def") and "unroll" in src.text(previous):
        return previous.start_byte
    return loop.start_byte


def root_variable(node: Node) -> Node:
    """The variable at the root of a place: `a` of `a[i]`, `a[i][j]`, `*p`, `s.f`, `(a)[i]` (the innermost node reached
    where it is not an identifier)."""
    while node.type in ("subscript_expression", "pointer_expression", "field_expression", "parenthesized_expression"):
        inner = node.child_by_field_name("argument")
        if inner is None:
            inner = next((c for c in node.named_children), None)
        if inner is None:
            break
        node = inner
    return node
