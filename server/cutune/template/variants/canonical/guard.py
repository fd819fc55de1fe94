"""guard: a one-element-per-thread kernel whose index is bounded by an early-return guard, written as the
grid-stride loop it is at its launch.

    const T i = blockIdx.x * blockDim.x + threadIdx.x;      for (T i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;                                 →         i < n; i += blockDim.x * gridDim.x) {
    REST                                                        REST   (a top-level `return;` → `continue;`)
                                                              }

(or `if (i < n) { REST }` as the last statement). At the original launch, whose grid covers [0, n), each
thread runs the loop once, exactly as it ran REST; with any smaller grid the loop still covers [0, n)
once, so the stride-loop transforms (vectorize, packs_per_thread, grid_shape) apply and may shrink the grid.

A guard `if (i >= n || other) return;` keeps `other` as `if (other) continue;` at the top of the loop (and
`if (i < n && other) {...}` as `if (!(other)) continue;`). Where `other`, or the condition of an exit right
after the guard (`if (row >= rows) return;`), has one value on every iteration (names and comparisons only, none
computed from the index or written in the loop), it stays an exit before the loop instead: the thread left there
too, and the transforms then see every iteration touch the row's memory. Declarations between the index and its
guard that read the index move into the loop; the others stay before it, and so do exits there on what no thread
index reads (`if (row >= rows) return;` before the column's check: the thread's row, the same for all its columns).

Refused, with the reason, where an iteration would not be the thread it was: threads cooperate (barriers,
shared memory, warp collectives, a call whose name says it may: an atomic on one address, `atomicAdd`, is the
element's own update and commutes with the others, so it does not), the block index, thread index, block size or
grid size (x axis) is read elsewhere, a `return` sits in a nested loop or switch, the bound changes, or the index is
written.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from cutune.cuda.access import CASTS
from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.cuda.syntax import nested_scope
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.recipes.index_bits import HELPER as INDEX_TYPE
from cutune.template.recipes.items_per_thread import _COOPERATION as COOPERATION
from cutune.template.recipes.items_per_thread import _bare as bare
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.loops import (
    SIGNED_WIDTH,
    grid_index_axis,
    indented,
    index_form,
    line_indent,
    single_declaration,
    stride_loops,
    written_names,
)

NAME = "grid_stride_guard"
PREFIX = "cutune_pack_"  # the loop index over the packs of a scaled index
_NAME = re.compile(r"[A-Za-z_]\w*")
_COLLECTIVE = re.compile(r"reduce|sync|shfl|ballot|warp|block|barrier|atomic", re.IGNORECASE)
# an atomic on one address (`atomicAdd`, ATen's `gpuAtomicAdd`, `atomicMax_block`): the element's own update, which
# commutes with every other thread's, whichever thread makes it
_ONE_ADDRESS_ATOMIC = re.compile(
    r"(?:\w+::)*[a-z]*[Aa]tomic(?:Add|Sub|Exch|Min|Max|Inc|Dec|CAS|And|Or|Xor|Mul|Div)(?:_block|_system)?(?:<[\w:\s,*]*>)?"
)


def grid_stride_guard(model: SourceModel, kernel: str) -> SourceModel | str | None:
    """The model with `kernel`'s guarded one-element body written as a grid-stride loop; why not (a reason);
    or None when the kernel has no thread index of that form (nothing to canonicalise)."""
    text = kernel_body(model, kernel)
    if "threadIdx" not in text:
        return None
    src = KernelSource(model, model.kernel(kernel))
    if stride_loops(src)[0]:
        return None  # already a stride loop: the transforms read it as it is
    statements = [c for c in src.body.named_children if c.type != "comment"]
    chunk = _chunk(src, statements[-1]) if statements else None
    region_end = statements[-1].end_byte if statements else 0
    if chunk is not None:  # the thread's block-chunks: each chunk's statements, as one element per thread
        statements = [c for c in chunk[0].named_children if c.type != "comment"]
    indices = {k: found for k, s in enumerate(statements) if (found := _thread_index(src, s, chunk)) is not None}
    if not indices or (chunk is not None and min(indices) != 0):
        return None
    chosen = _checked_index(src, statements, indices)
    if isinstance(chosen, str):
        return chosen
    k, g, quotient = chosen
    index = statements[k]
    name_node, value, axis, scale = indices[k]
    var = src.text(name_node)
    rest = statements[k + 1 :]
    g -= k + 1
    guard, between = rest[g], rest[:g]
    tested = quotient[0] if quotient is not None else var
    parsed = _guard(src, guard, tested, last=g == len(rest) - 1, exit="continue" if chunk else "return")
    if isinstance(parsed, str):
        return parsed
    bound, others, negate, inner = parsed
    vtype = src.text(index)[: name_node.start_byte - index.start_byte].strip()
    vtype = re.sub(r"\bconst\b|\bconstexpr\b", "", vtype).strip() or "int"
    if quotient is not None:  # i / D < N ⇔ i < N * D (i ≥ 0, D > 0), in the index's type: N * D may pass 2³²
        wide = f"decltype({src.text(value)})" if vtype == "auto" else vtype
        bound = f"static_cast<{wide}>({bound}) * ({quotient[1]})"
    inner = inner if inner is not None else rest[g + 1 :]
    blocker = _blocker(src, index, var, axis, bound, between, inner)
    if blocker is not None:
        return blocker
    if chunk is not None and any(
        src.text(n) == chunk[1] and not index.start_byte <= n.start_byte < index.end_byte
        for n in descendants(chunk[0], "identifier")
    ):
        return f"the chunk counter {chunk[1]} is read beyond the index {var}"
    derived = {var}
    moved, kept = [], []
    for d in between:
        if _reads(src, d) & derived:
            if d.type != "declaration":  # an exit on a value computed from the index: the element's, not the thread's
                return f"the exit at line {src.line(d)} reads a value computed from {var}, before its bounds check"
            moved.append(d)
            derived |= _declares(src, d)
        else:
            kept.append(d)
    if set(_NAME.findall(bound)) & derived:
        return f"the bound `{bound}` of {var} reads a value computed from {var}"
    indent = line_indent(src.data, index.start_byte)
    body: list[str] = [src.text(d) for d in moved]
    hoisted: list[str] = []  # exits on what no iteration changes: taken once, before the loop, as the thread did
    changing = derived | {n for s in [*moved, *inner] for n in written_names(src, s) | _declares(src, s)}
    if others and chunk is None and _invariant(others, changing):
        hoisted.append(f"if (!({others})) return;" if negate else f"if ({others}) return;")
        others = ""
    while chunk is None and inner and (condition := _exit_condition(src, inner[0])) is not None:
        if not _invariant(src.text(condition), changing):
            break
        hoisted.append(f"if {src.text(condition)} return;")
        inner = inner[1:]
    if others:
        body.append(f"if (!({others})) continue;" if negate else f"if ({others}) continue;")
    if inner:
        body.append(_continued(src, inner[0].start_byte, inner[-1].end_byte))
    stride = f"blockDim.x * gridDim.{axis}"
    start_text = f"static_cast<{vtype}>(blockIdx.x) * blockDim.x + threadIdx.x" if chunk else src.text(value)
    if scale is None:
        header = f"{vtype} {var} = {start_text}; {var} < {bound}; {var} += {stride}"
    else:  # `i = gid * C` bounded by n: the packs gid below ceil(n / C), each at i = gid * C as before
        gid, count = scale
        pack = f"{PREFIX}{var}"
        header = f"{vtype} {pack} = {gid}; {pack} < (({bound}) + ({count}) - 1) / ({count}); {pack} += {stride}"
        body.insert(0, f"const {vtype} {var} = {pack} * ({count});")
    loop = "\n".join([f"for ({header}) {{", *(indented(b, "  ") for b in body), "}"])
    text = f"\n{indent}".join([*(src.text(d) for d in kept), *hoisted, indented(loop, indent).lstrip()])
    edits = EditList(src.data)
    start = chunk[0].parent.start_byte if chunk is not None and chunk[0].parent is not None else index.start_byte
    edits.replace(start, region_end, text)
    return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)


def _exit_condition(src: KernelSource, statement: Node) -> Node | None:
    """The condition of `if (C) return;` (or `{ return; }`, no `else`), else None."""
    if statement.type != "if_statement" or statement.child_by_field_name("alternative") is not None:
        return None
    then = statement.child_by_field_name("consequence")
    while then is not None and then.type == "compound_statement" and then.named_child_count == 1:
        then = then.named_children[0]
    if then is None or then.type != "return_statement" or then.named_child_count:
        return None
    return statement.child_by_field_name("condition")


# what a condition may not hold to be the same on every iteration: a call, a memory read (`*` too, though it may be
# a product: this check is on text, and refusing is the safe side), a write
_CALL = re.compile(r"[A-Za-z_]\w*\s*\(")
_MEMORY_OR_WRITE = re.compile(r"\[|->|\*|\+\+|--|(?<![=!<>])=(?!=)")


def _other_exit(src: KernelSource, statement: Node, indices: set[str]) -> bool:
    """Whether `statement` is `if (C) return;` with C one value for the thread whatever its element: no call or
    memory read, no thread index of the kernel."""
    condition = _exit_condition(src, statement)
    return condition is not None and _invariant(src.text(condition), indices)


def _invariant(condition: str, changing: set[str]) -> bool:
    """Whether `condition` has one value on every iteration of the thread's loop: names, members and comparisons
    only (no call, memory read or write), none of them the index, what is computed from it, or written in the
    loop."""
    if _CALL.search(condition) or _MEMORY_OR_WRITE.search(condition):
        return False
    return not set(_NAME.findall(condition)) & changing


def _checked_index(
    src: KernelSource, statements: list[Node], indices: dict[int, tuple[Node, Node, str, tuple[str, str] | None]]
) -> tuple[int, int, tuple[str, str] | None] | str:
    """(the index's statement, its check's statement, the quotient of the index it checks where it checks one:
    its name and divisor): the first statement after the first index that is not a declaration, nor an exit on
    what no index reads (`if (row >= rows) return;` before the column's check), must check an index (the x-axis
    one where it checks several) or its quotient by names (`row = i / cols`); else why not."""
    first = min(indices)
    index_names = {src.text(found[0]) for found in indices.values()}
    g, derived = None, set(index_names)  # an exit on a value computed from an index is a check of that index
    for j in range(first + 1, len(statements)):
        if statements[j].type == "declaration":
            if _reads(src, statements[j]) & derived:
                derived |= _declares(src, statements[j])
        elif not _other_exit(src, statements[j], derived):
            g = j
            break
    if g is None or statements[g].type != "if_statement":
        var = src.text(indices[first][0])
        return f"no bounds check on {var} after its declaration (`if ({var} >= n) return;` or `if ({var} < n) {{...}}`)"
    guarded = {src.text(indices[k][0]): k for k in indices if k < g}
    condition = statements[g].child_by_field_name("condition") or statements[g]
    named = {src.text(n) for n in descendants(condition, "identifier")}
    tested = named & set(guarded)
    if len(tested) > 1:  # several indices checked at once: the one over the grid's x axis is the loop's
        tested = {t for t in tested if indices[guarded[t]][2] == "x"}
    if not tested:
        quotients = {}
        for statement in statements[first + 1 : g]:
            if (found := _quotient(src, statement, set(guarded))) is not None:
                quotients[found[0]] = (guarded[found[1]], found[2])
        checked = sorted(named & set(quotients))
        if len(checked) == 1:  # `q = i / D; if (q >= N) return;`: the check of i against N * D
            k, divisor = quotients[checked[0]]
            if _CALL.search(divisor) or _MEMORY_OR_WRITE.search(divisor) or indices[k][3] is not None:
                return (
                    f"the check at line {src.line(statements[g])} tests {checked[0]}, a quotient of a thread index "
                    f"by `{divisor}`, which is not a name or product of names"
                )
            return k, g, (checked[0], divisor)
        names = ", ".join(sorted(guarded))
        return f"the first check after the thread index (line {src.line(statements[g])}) does not test {names}"
    if len(tested) != 1:
        return f"the check at line {src.line(statements[g])} tests several thread indices over the grid's x axis"
    return guarded[tested.pop()], g, None


def _quotient(src: KernelSource, statement: Node, indices: set[str]) -> tuple[str, str, str] | None:
    """For `T q = i / D;` (i a thread index, D names only): (q, i, D's text)."""
    declared = single_declaration(statement) if statement.type == "declaration" else None
    if declared is None:
        return None
    value = bare(src, declared[1])
    if value.type != "binary_expression" or src.field(value, "operator") != "/":
        return None
    left = value.child_by_field_name("left")
    arguments = left.child_by_field_name("arguments") if left is not None else None
    if left is not None and arguments is not None and src.field(left, "function").startswith(f"{INDEX_TYPE}<"):
        left = arguments.named_children[0] if arguments.named_child_count == 1 else left  # index_bits' type
    index = "".join(src.text(bare(src, left)).split()) if left is not None else ""
    return (src.text(declared[0]), index, src.field(value, "right")) if index in indices else None


def _chunk(src: KernelSource, statement: Node) -> tuple[Node, str, str] | None:
    """For `for (int u = 0; u < K; ++u) {...}` (the kernel's last statement, K constant): its body, u and K."""
    if statement.type != "for_statement":
        return None
    init, cond, update = (statement.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    body = statement.child_by_field_name("body")
    if init is None or cond is None or update is None or body is None or body.type != "compound_statement":
        return None
    match = re.fullmatch(r"(?:int|unsigned|unsignedint)(\w+)=0;?", "".join(src.text(init).split()))
    if match is None:
        return None
    item = match.group(1)
    bound = re.fullmatch(rf"{item}<(\w+)", "".join(src.text(cond).split()))
    if bound is None or "".join(src.text(update).split()) not in (f"++{item}", f"{item}++", f"{item}+=1"):
        return None
    if not compile_time(src, bound.group(1)) or item in written_names(src, body):
        return None
    return body, item, bound.group(1)


def _thread_index(
    src: KernelSource, statement: Node, chunk: tuple[Node, str, str] | None = None
) -> tuple[Node, Node, str, tuple[str, str] | None] | None:
    """For `T i = GID;` or `T i = GID * C;` (GID a global thread index over a grid axis, C constant at compile
    time): the name, the value, the axis and, when scaled, (GID's text, C's text). In a chunk loop over u < K,
    GID is the chunk's `(blockIdx.x * K + u) * blockDim.x + threadIdx.x`."""
    declared = single_declaration(statement)
    if declared is None or "[" in src.text(statement):
        return None
    name, value = declared
    if chunk is not None:
        _, item, count = chunk
        chunked = re.sub(
            rf"(?:static_cast<[^<>]*>|\([\w ]+\))?\(blockIdx\.x\*{count}\+{item}\)",
            "blockIdx.x",
            index_form(src.text(value)),
        )
        return (name, value, "x", None) if grid_index_axis(chunked) == "x" else None
    axis = grid_index_axis(src.text(value))
    if axis is not None:
        return name, value, axis, None
    product = bare(src, value)
    if product.type != "binary_expression" or src.field(product, "operator") != "*":
        return None
    for gid, count in (("left", "right"), ("right", "left")):
        axis = grid_index_axis(src.field(product, gid))
        if axis is not None and compile_time(src, src.field(product, count)):
            return name, value, axis, (src.field(product, gid), src.field(product, count))
    return None


def compile_time(src: KernelSource, text: str) -> bool:
    """Whether `text` is known at compile time: literals, sizeof, template parameters and constexpr locals."""
    known = {p.name for p in src.kernel.template_params} | {
        src.text(target)
        for d in src.in_body("declaration")
        if "constexpr" in src.text(d).split("=")[0]
        for target in (declarator_target(d),)
        if target is not None
    }
    names = set(_NAME.findall(re.sub(r"sizeof\s*\([^()]*\)", "", text)))
    return bool(text.strip()) and names <= known


def declarator_target(declaration: Node) -> Node | None:
    """The name a one-declarator declaration declares."""
    declarators = declaration.children_by_field_name("declarator")
    target = declarators[0] if len(declarators) == 1 else None
    if target is not None and target.type == "init_declarator":
        target = target.child_by_field_name("declarator")
    return target if target is not None and target.type == "identifier" else None


def _guard(
    src: KernelSource, guard: Node, var: str, *, last: bool, exit: str
) -> tuple[str, str, bool, list[Node] | None] | str:
    """The guard's bound on `var`, its other conditions, whether they hold to continue (`&&`), and the guarded
    statements (None: those after an early `exit`, return or continue); or why it is not a bounds check."""
    condition = guard.child_by_field_name("condition")
    consequence = guard.child_by_field_name("consequence")
    if condition is None or consequence is None or not condition.named_children:
        return "the guard has no condition"
    if guard.child_by_field_name("alternative") is not None:
        return f"the guard on {var} has an else branch (line {src.line(guard)})"
    test = bare(src, condition.named_children[0])
    for joiner, exits in (("||", True), ("&&", False)):
        terms = _terms(src, test, joiner)
        bounds = [(t, b) for t in terms if (b := _bound(src, t, var, exits)) is not None]
        if len(bounds) != 1:
            continue
        others = " || " if exits else " && "
        rest = others.join(src.text(t) for t in terms if t is not bounds[0][0])
        if any(descendants(t, "assignment_expression", "update_expression") for t in terms):
            return f"the guard on {var} has side effects (line {src.line(guard)})"
        if exits:
            statement = consequence
            if statement.type == "compound_statement" and statement.named_child_count == 1:
                statement = statement.named_children[0]
            if statement.type != f"{exit}_statement" or statement.named_child_count:
                return f"the guard on {var} does more than `{exit};` (line {src.line(guard)})"
            return bounds[0][1], rest, False, None
        if not last:
            return f"statements follow the guarded block of {var} (line {src.line(guard)})"
        inner = (
            [c for c in consequence.named_children if c.type != "comment"]
            if consequence.type == "compound_statement"
            else [consequence]
        )
        return bounds[0][1], rest, True, inner
    return f"the guard at line {src.line(guard)} is not `{var} >= n` (return) or `{var} < n` (block)"


def _terms(src: KernelSource, test: Node, joiner: str) -> list[Node]:
    """The operands of a chain of `joiner` (|| or &&), parentheses removed."""
    test = bare(src, test)
    if test.type == "binary_expression" and src.field(test, "operator") == joiner:
        left, right = test.child_by_field_name("left"), test.child_by_field_name("right")
        if left is not None and right is not None:
            return _terms(src, left, joiner) + _terms(src, right, joiner)
    return [test]


def _bound(src: KernelSource, term: Node, var: str, exits: bool) -> str | None:
    """n for `var >= n` / `n <= var` / `var > n - 1` (exits) or `var < n` / `n > var` / `var <= n - 1` (continues),
    else None."""
    if term.type != "binary_expression":
        return None
    op, left, right = (src.field(term, f) for f in ("operator", "left", "right"))
    left, right = "".join(left.split()), "".join(right.split())
    if left == var and op == (">=" if exits else "<"):
        return src.field(term, "right")
    if right == var and op == ("<=" if exits else ">"):
        return src.field(term, "left")
    # `var > n - 1` is `var >= n` where n - 1 cannot wrap: n a parameter of a signed integer type
    if left == var and op == (">" if exits else "<="):
        last = right
    elif right == var and op == ("<" if exits else ">="):
        last = left
    else:
        return None
    signed = {p.name for p in src.kernel.params if re.sub(r"\bconst\b", "", p.type).strip() in SIGNED_WIDTH}
    return last[:-2] if last.endswith("-1") and last[:-2] in signed else None


def _blocker(
    src: KernelSource, index: Node, var: str, axis: str, bound: str, between: list[Node], inner: list[Node]
) -> str | None:
    """Why the guarded statements cannot run as grid-stride iterations, or None."""
    grid = {f"blockIdx.{axis}", "threadIdx.x", "blockDim.x", f"gridDim.{axis}"}
    for node in src.in_body("identifier", "namespace_identifier", "type_qualifier"):
        if COOPERATION.fullmatch(src.text(node)) or src.text(node) == "cub":
            return f"threads cooperate through {src.text(node)} (line {src.line(node)}): one element per thread"
    for node in src.in_body("field_expression"):
        if src.text(node) in grid and not index.start_byte <= node.start_byte < index.end_byte:
            return f"{src.text(node)} is read beyond the index {var} (line {src.line(node)}): the thread is the work"
    for call in src.in_body("call_expression"):
        callee = src.field(call, "function")
        if _COLLECTIVE.search(callee) and not _ONE_ADDRESS_ATOMIC.fullmatch("".join(callee.split())):
            # a helper from elsewhere may hide a warp or block collective
            return f"calls {callee} (line {src.line(call)}), which may make the threads of a warp or block cooperate"
    for node in src.in_body("goto_statement", "labeled_statement"):
        return f"jumps with goto (line {src.line(node)})"
    written = written_names(src, src.body)
    if var in written:
        return f"{var} is written after its declaration"
    changing = set(_NAME.findall(bound)) & written
    if changing:
        return f"the bound `{bound}` reads {sorted(changing)[0]}, which the kernel changes"
    for statement in (*between, *inner):
        for r in descendants(statement, "return_statement"):
            if r.named_child_count:
                return f"returns a value (line {src.line(r)})"
            if nested_scope(r, src.body) is not None:
                return f"a `return` inside a loop, switch or lambda (line {src.line(r)}) cannot become `continue`"
    casts = {*CASTS, INDEX_TYPE}  # conversions, not calls (index_bits writes the last)
    for statement in between:
        calls = [
            c
            for c in descendants(statement, "call_expression")
            if src.field(c, "function").split("<")[0].strip() not in casts
        ]
        if calls and _reads(src, statement) & {var}:
            return f"calls a function between {var} and its guard (line {src.line(statement)})"
    return None


def _reads(src: KernelSource, node: Node) -> set[str]:
    return {src.text(n) for n in descendants(node, "identifier")}


def _declares(src: KernelSource, declaration: Node) -> set[str]:
    names = set()
    for d in declaration.children_by_field_name("declarator"):
        target = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
        if target is not None and target.type == "identifier":
            names.add(src.text(target))
    return names


def _continued(src: KernelSource, start: int, end: int) -> str:
    """The text of bytes [start, end) with each top-level `return;` (all that are left) made `continue;`."""
    returns = [r for r in descendants(src.body, "return_statement") if start <= r.start_byte < end]
    pieces, pos = [], start
    for r in returns:
        pieces += [src.data[pos : r.start_byte].decode(), "continue;"]
        pos = r.end_byte
    pieces.append(src.data[pos:end].decode())
    margin = line_indent(src.data, start)
    lines = "".join(pieces).split("\n")
    return "\n".join([lines[0]] + [ln[len(margin) :] if ln.startswith(margin) else ln for ln in lines[1:]])
