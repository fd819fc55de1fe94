"""row_cache: a row a kernel reads in several counted passes over the same rounds (`for (i = 0; i < R; ++i)`: an
online softmax's statistics pass, then its normalising pass) read from memory once, all of it before the first pass,
and kept in registers for every pass.

The form read (names free; `LOAD` a pack's load, `v.load(A)` / `v.cast_load(A)`, or a read of global memory,
`*reinterpret_cast<const P*>(A)`, `p[k]`, `__ldg(A)`, as an assignment's value or a declaration's):

    for (T i = 0; i < R; ++i) { ...  [if (C) ...] LOAD ... }          the first pass, every round's load
    ...
    for (T i = 0; i < R; ++i) { ...  [if (C) [if (D)] ...] LOAD ... }  a later pass: the same load, under C too

Each pass becomes `if (R <= ROW_CACHE_ROUNDS) { fully unrolled rounds } else { the loop as written }`. Before the
first pass's unrolled rounds, every round's load is fetched into a register array (`cache[i]`, under the load's own
conditions and with the pass's constants it reads), so all of a row's loads are in flight before any value is used;
then each pass, the first too, reads `cache[i]` where it loaded. At ROW_CACHE_ROUNDS = 0 (the default) every pass runs
as written. The values are the same: the round's index and every name a load and its conditions read are not
assigned in the kernel (or are the round's own constants, declared alike in every pass), so a pass reads the cache
only under conditions that imply the fetch's, at the same address; the first pass leaves no round early (`break`,
`continue`, `return`: the fetches would read what it never reads, maybe past the row's end); and no write from the
first pass to the last reaches the row: a store there goes to the thread's locals, to shared memory, or through a
pointer parameter where one of the two is `__restrict__` or at the load's own offset (in place: the element's own
store, after its loads). Pointers that are not `__restrict__` are taken to meet the loaded row only there, element for
element, as a kernel's unordered threads need them to (the variant's note says so); a call that is given a pointer to
global memory, or an atomic, refuses the rewrite. It is also tried on online_merge's variant (an online softmax's
per-round reductions merged once after its loop); that chained variant stands beside the two plain ones.

Measured (H200, runs 92 and 94): flashinfer's online softmax 1.21-1.28× at rows of 4 rounds, 1.06-1.07× at 64 MB and
beyond, where a 1024-thread block leaves few registers to cache in (at 8 rounds an SM holds one such block, not two).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.access import CASTS
from cutune.cuda.model import SourceModel
from cutune.errors import TransformRefused
from cutune.spec import KernelSpec
from cutune.template.edits import EditList
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.item_shared import shared_declarations
from cutune.template.variants.loops import (
    BREAKABLE,
    declared_names,
    edited_body,
    indented,
    kernel_source,
    line_indent,
    rewritten,
    root_variable,
    single_declaration,
    squeezed,
    statements_of,
    with_pragma,
    written_names,
)
from cutune.template.variants.model import Provenance, Transform, Variant
from cutune.template.variants.pointers import Pointers

NAME = "row_cache"
ROUNDS = "ROW_CACHE_ROUNDS"
PREFIX = "cutune_rc"
_LOAD_METHOD = re.compile(r"(?:\w+_)?load(?:_\w+)?")
_STORE_METHOD = re.compile(r"(?:\w+_)?store(?:_\w+)?")
_EXITS = ("return_statement", "goto_statement")
_WORD = re.compile(r"(?<![.\w])(?<!->)[A-Za-z_]\w*")  # a name, not a member's


class _Refused(Exception):
    pass


@dataclass(frozen=True)
class _Pass:
    """A counted loop over a row's rounds: `for (T index = 0; index < bound; ++index) body`."""

    loop: Node
    index: str
    index_type: str
    bound: str  # squeezed
    body: Node


@dataclass(frozen=True)
class _Load:
    """One read of global memory in a pass: the statement `v.load(A)` or the expression read, with its address and
    the conditions (squeezed, `!`-prefixed in an `else`) it runs under."""

    node: Node
    key: str  # what two passes' loads must share (squeezed text)
    address: Node
    conditions: frozenset[str]
    guards: tuple[str, ...]  # the same conditions as C++ expressions, outermost first
    target: str | None  # the pack a statement load fills; None for an expression
    method: str  # its load method ("" for an expression)
    value_type: str  # the type of the value kept


def _pass(src: KernelSource, loop: Node) -> _Pass | None:
    """`loop` as a _Pass, None when it is not a loop counted up from 0 by one."""
    if loop.type != "for_statement":
        return None
    init, cond, update, body = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update", "body"))
    declared = single_declaration(init)
    if init is None or cond is None or update is None or body is None or declared is None:
        return None
    name, start = declared
    index = src.text(name)
    if squeezed(src.text(start)) not in ("0", "0u", "0U") or cond.type != "binary_expression":
        return None
    if src.field(cond, "operator") != "<" or src.field(cond, "left").strip() != index:
        return None
    step = "".join(src.text(update).split())
    if step not in (f"++{index}", f"{index}++", f"{index}+=1"):
        return None
    index_type = " ".join(re.sub(r"\bconst\b", " ", src.text(init)[: name.start_byte - init.start_byte]).split())
    return _Pass(loop, index, index_type, "".join(src.field(cond, "right").split()), body)


def _names(src: KernelSource, node: Node) -> set[str]:
    return {src.text(n) for n in descendants(node, "identifier")}


def _type_of(src: KernelSource, name: str, scope: Node) -> str | None:
    """The type (qualifiers dropped) of the one declaration of `name` in `scope` (a pass), else in the kernel, where it
    declares a plain variable; None otherwise."""
    found = [d for d in descendants(scope, "declaration") if name in declared_names(src, d)]
    found = found or [d for d in src.in_body("declaration") if name in declared_names(src, d)]
    kind = found[0].child_by_field_name("type") if len(found) == 1 else None
    if kind is None or src.text(kind) == "auto":
        return None
    for declarator in found[0].children_by_field_name("declarator"):
        inner = declarator.child_by_field_name("declarator") if declarator.type == "init_declarator" else declarator
        if inner is not None and inner.type == "identifier" and src.text(inner) == name:
            return src.text(kind)
    return None


def _dereferenced(src: KernelSource, node: Node) -> Node:
    """The address `*A`, `*cast(A)` or `*reinterpret_cast<P*>(A)` reads or writes: A."""
    operand = node.child_by_field_name("argument")
    while operand is not None and operand.type == "parenthesized_expression" and operand.named_children:
        operand = operand.named_children[0]
    if (
        operand is not None
        and operand.type == "call_expression"
        and src.field(operand, "function").startswith("reinterpret_cast")
    ):
        args = operand.child_by_field_name("arguments")
        if args is not None and len(args.named_children) == 1:
            return args.named_children[0]
    if operand is not None and operand.type == "cast_expression":
        value = operand.child_by_field_name("value")
        return value if value is not None else operand
    return operand if operand is not None else node


def _expression_load(src: KernelSource, value: Node, pointers: Pointers) -> Node | None:
    """The address `value` reads global memory at, when it is such a read: `*cast(A)`, `__ldg(A)`, `p[k]`."""
    if value.type == "pointer_expression" and src.text(value).startswith("*"):
        return _dereferenced(src, value)
    if value.type == "call_expression" and "".join(src.field(value, "function").split()) == "__ldg":
        args = value.child_by_field_name("arguments")
        return args.named_children[0] if args is not None and len(args.named_children) == 1 else None
    if value.type == "subscript_expression":
        array = value.child_by_field_name("argument")
        if array is not None and array.type == "identifier" and src.text(array) in pointers.names:
            return value
    return None


def _loads(src: KernelSource, run: _Pass, pointers: Pointers) -> list[_Load]:
    """The loads of global memory a pass makes in its rounds, outside inner loops."""
    found: list[_Load] = []

    def visit(node: Node, conditions: frozenset[str], guards: tuple[str, ...] = ()) -> None:
        if node.type == "compound_statement":
            for child in node.named_children:
                visit(child, conditions, guards)
        elif node.type == "if_statement":
            cond = node.child_by_field_name("condition")
            text = ("constexpr:" if "constexpr" in src.text(node).split("(")[0] else "") + squeezed(
                src.text(cond) if cond is not None else ""
            )
            consequence, alternative = node.child_by_field_name("consequence"), node.child_by_field_name("alternative")
            inner = cond.named_children if cond is not None else []
            written = src.text(inner[0]) if len(inner) == 1 else src.text(cond) if cond is not None else "true"
            if consequence is not None:
                visit(consequence, conditions | {text}, (*guards, written))
            if alternative is not None:
                arm = alternative.named_children[0] if alternative.type == "else_clause" else alternative
                visit(arm, conditions | {f"!{text}"}, (*guards, f"!{written}"))
        elif node.type == "expression_statement" and node.named_children:
            expr = node.named_children[0]
            if expr.type == "call_expression":
                callee = expr.child_by_field_name("function")
                args = expr.child_by_field_name("arguments")
                if callee is not None and callee.type == "field_expression" and args is not None:
                    obj, method = callee.child_by_field_name("argument"), callee.child_by_field_name("field")
                    if (
                        obj is not None
                        and obj.type == "identifier"
                        and method is not None
                        and _LOAD_METHOD.fullmatch(src.text(method))
                        and len(args.named_children) == 1
                    ):
                        kind = _type_of(src, src.text(obj), run.body)
                        if kind is not None:
                            key = "".join(src.text(expr).split())
                            found.append(
                                _Load(
                                    node,
                                    key,
                                    args.named_children[0],
                                    conditions,
                                    guards,
                                    src.text(obj),
                                    src.text(method),
                                    kind,
                                )
                            )
            elif expr.type == "assignment_expression" and src.field(expr, "operator") == "=":
                left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
                if left is not None and left.type == "identifier" and right is not None:
                    address = _expression_load(src, right, pointers)
                    kind = _type_of(src, src.text(left), run.body)
                    if address is not None and kind is not None:
                        key = "".join(src.text(right).split())
                        found.append(_Load(right, key, address, conditions, guards, None, "", kind))
        elif node.type == "declaration":
            declared = single_declaration(node)
            written_type = node.child_by_field_name("type")
            if declared is not None and written_type is not None and src.text(written_type) != "auto":
                address = _expression_load(src, declared[1], pointers)
                if address is not None:
                    key = "".join(src.text(declared[1]).split())
                    found.append(_Load(declared[1], key, address, conditions, guards, None, "", src.text(written_type)))

    visit(run.body, frozenset())
    return found


class RowCache(Transform):
    """A row read in several counted passes read once and kept in registers."""

    name = NAME
    chains_onto = frozenset({"online_merge"})

    def apply(self, model: SourceModel, kernel: str, spec: KernelSpec | None) -> Variant:
        """The variant of `kernel` with its later passes reading the first's registers, or TransformRefused why not."""
        src = kernel_source(self.name, model, kernel)
        pointers = Pointers.of(src)
        reasons: list[str] = []
        for block in [src.body, *(b for b in src.in_body("compound_statement") if b.id != src.body.id)]:
            passes = [p for s in statements_of(block) if (p := _pass(src, s)) is not None]
            for i, first in enumerate(passes):
                later = [p for p in passes[i + 1 :] if p.bound == first.bound and p.index == first.index]
                if not later:
                    continue
                try:
                    return self._variant(src, pointers, first, later)
                except _Refused as e:
                    reasons.append(f"the passes from line {src.line(first.loop)}: {e}")
        if not reasons:
            reasons.append("no two counted loops over the same rounds (`for (i = 0; i < R; ++i)`) in one block")
        raise TransformRefused(self.name, "; ".join(dict.fromkeys(reasons)))

    def _variant(self, src: KernelSource, pointers: Pointers, first: _Pass, later: list[_Pass]) -> Variant:
        """The rewrite of `first` and the `later` passes that read a load of it again; _Refused where none can."""
        written = written_names(src, src.body)
        _invariant(src, first, set(_WORD.findall(first.bound)), written, "its count")
        for run in (first, *later):
            if run.index in written_names(src, run.body):
                raise _Refused(f"the round `{run.index}` is assigned in the pass at line {src.line(run.loop)}")
        kept: list[tuple[_Load, list[tuple[_Pass, _Load]]]] = []
        why: list[str] = []
        for load in _loads(src, first, pointers):
            readers: list[tuple[_Pass, _Load]] = []
            for run in later:
                twin = next((t for t in _loads(src, run, pointers) if t.key == load.key), None)
                if twin is None:
                    continue
                if not load.conditions <= twin.conditions:
                    why.append(
                        f"line {src.line(twin.node)} loads it under other conditions than line {src.line(load.node)}"
                    )
                    continue
                try:
                    first_values = _invariant(src, first, _read(src, load), written, f"line {src.line(load.node)}")
                    twin_values = _invariant(src, run, _read(src, twin), written, f"line {src.line(twin.node)}")
                except _Refused as e:
                    why.append(str(e))
                    continue
                names = set(first_values) | _read(src, load)
                differ = sorted(n for n in names if first_values.get(n) != twin_values.get(n))
                if differ:
                    why.append(f"`{differ[0]}` differs between lines {src.line(load.node)} and {src.line(twin.node)}")
                    continue
                readers.append((run, twin))
            leaves = _exit(src, [first.body], first.body) if readers else None
            if leaves is not None and not leaves.startswith("leaves its loop"):
                why.append(f"the first pass {leaves}: the later passes may never run")  # a return or a goto
                continue
            if leaves is not None:
                # fetched before a pass that may stop early, a load must be one a later pass reads in every round
                # under the same conditions, reached whenever the first pass is: it then reads nothing new
                block = first.loop.parent
                if not any(
                    twin.conditions == load.conditions
                    and _exit(src, [run.body], run.body) is None
                    and block is not None
                    and _exit(
                        src,
                        [n for n in statements_of(block) if first.loop.end_byte <= n.start_byte < run.loop.start_byte],
                        block,
                    )
                    is None
                    for run, twin in readers
                ):
                    why.append(f"the first pass {leaves}, and no later pass reads every round it fetches")
                    continue
            if readers:
                try:
                    _unwritten(src, pointers, load, first, readers)
                except _Refused as e:
                    why.append(str(e))
                    continue
                kept.append((load, readers))
        if not kept:
            raise _Refused("; ".join(why) if why else "no later pass reads what the first loads")
        needed = {n for load, _ in kept for n in _invariant(src, first, _read(src, load), written, "")}
        return self._rewritten(src, first, kept, needed)

    def _rewritten(
        self,
        src: KernelSource,
        first: _Pass,
        kept: list[tuple[_Load, list[tuple[_Pass, _Load]]]],
        needed: set[str],
    ) -> Variant:
        edits = EditList(src.data)
        caches = {id(load): f"{PREFIX}{n}" for n, (load, _) in enumerate(kept)}
        index = first.index
        # every pass, the first too, reads the round's registers where it loaded
        runs: dict[int, tuple[_Pass, list[tuple[Node, str]]]] = {id(first.loop): (first, [])}
        for load, readers in kept:
            cache = f"{caches[id(load)]}[{index}]"
            for run, twin in [(first, load), *readers]:
                text = f"{twin.target} = {cache};" if twin.target is not None else cache
                runs.setdefault(id(run.loop), (run, []))[1].append((twin.node, text))
        # which the rounds fetch first, all of them, so every load is in flight before any value is used
        fetches = [
            src.text(d)
            for d in statements_of(first.body)
            if d.type == "declaration" and declared_names(src, d) & needed
        ]
        for load, _ in kept:
            cache = f"{caches[id(load)]}[{index}]"
            fetch = (
                f"{cache}.{load.method}({src.text(load.address)});"
                if load.target is not None
                else f"{cache} = {src.text(load.node)};"
            )
            guard = " && ".join(g if len(load.guards) == 1 else f"({g})" for g in load.guards)
            fetches.append(f"if ({guard}) {fetch}" if load.guards else fetch)
        fetch_body = "\n".join(f"    {f}" for f in fetches)
        prologue = (
            f"#pragma unroll\nfor ({first.index_type} {index} = 0; {index} < {ROUNDS}; ++{index}) {{\n"
            f"  if ({index} < {_bound_text(src, first)}) {{\n{fetch_body}\n  }}\n}}\n"
        )
        start = with_pragma(src, first.loop)
        indent = line_indent(src.data, start)
        declarations = "".join(
            f"{load.value_type} {caches[id(load)]}[{ROUNDS} > 0 ? {ROUNDS} : 1];  // a row's loads, a round each\n"
            f"{indent}"
            for load, _ in kept
        )
        for run, body_edits in runs.values():
            at = with_pragma(src, run.loop)
            lead = line_indent(src.data, at)
            body = rewritten(src, run.body, _by_id({node.id: text for node, text in body_edits}))
            unrolled = (prologue if run is first else "") + (
                f"#pragma unroll\nfor ({run.index_type} {index} = 0; {index} < {ROUNDS}; ++{index}) {{\n"
                f"  if ({index} < {_bound_text(src, run)}) {body}\n}}"
            )
            original = src.data[at : run.loop.end_byte].decode()
            text = (
                f"if ({ROUNDS} > 0 && {_bound_text(src, run)} <= {ROUNDS}) {{\n{indented(unrolled, lead + '  ')}\n"
                f"{lead}}} else {{\n{lead}  " + _shifted(original) + f"\n{lead}}}"
            )
            edits.replace(at, run.loop.end_byte, (declarations if run is first else "") + text)
        readers_count = len({id(run.loop) for _, readers in kept for run, _ in readers})
        return Variant(
            name=NAME,
            body=edited_body(src, edits),
            params=(
                TunableParam(
                    ROUNDS,
                    (0, 1, 2, 4, 8, 16, 32),
                    0,
                    Binding.TEMPLATE,
                    description="rounds of a row kept in registers between its passes (0: every pass reads memory)",
                    # 4 rounds: the best of every count at 16K-wide rows of flashinfer's online softmax (run 92)
                    try_first=4,
                ),
            ),
            provenance=Provenance(
                self.name,
                note=(
                    f"{len(kept)} load(s) of the pass at line {src.line(first.loop)} kept for {readers_count} later "
                    "pass(es) up to ROW_CACHE_ROUNDS rounds; pointers that are not __restrict__ taken to meet the "
                    "row only in place"
                ),
            ),
        )


def _by_id(texts: dict[int, str]) -> Callable[[Node], str | None]:
    """An edit for `rewritten`: the new text of each node named by id."""
    return lambda node: texts.get(node.id)


def _shifted(text: str) -> str:
    """`text`'s lines after the first two columns further in (blank ones left blank)."""
    return "\n".join(ln if i == 0 or not ln.strip() else "  " + ln for i, ln in enumerate(text.split("\n")))


def _read(src: KernelSource, load: _Load) -> set[str]:
    """The names a load's address and conditions read."""
    names = _names(src, load.address)
    for c in load.conditions:
        names |= set(_WORD.findall(c)) - {"constexpr"}
    return names


def _bound_text(src: KernelSource, run: _Pass) -> str:
    cond = run.loop.child_by_field_name("condition")
    right = cond.child_by_field_name("right") if cond is not None else None
    return f"({src.text(right)})" if right is not None else run.bound


def _invariant(
    src: KernelSource, run: _Pass, names: set[str], written: set[str], what: str, depth: int = 0
) -> dict[str, str]:
    """_Refused unless each of `names` has one value through the kernel: not assigned anywhere (the round's index
    aside), or a local of the pass declared once at its top with a value that is itself such; the values of those
    locals, by name."""
    own = {d: declared_names(src, d) for d in statements_of(run.body) if d.type == "declaration"}
    values: dict[str, str] = {}
    for name in sorted(names - {run.index}):
        local = next((d for d, declared in own.items() if name in declared), None)
        if local is not None and sum(name in declared_names(src, d) for d in descendants(run.body, "declaration")) > 1:
            raise _Refused(f"{what} reads `{name}`, declared more than once in its pass")
        if local is not None:
            declared = single_declaration(local)
            if declared is None or depth > 8 or name in written:
                raise _Refused(f"{what} reads `{name}`, set otherwise than once at the top of its pass")
            values[name] = squeezed(src.text(declared[1]))
            values.update(_invariant(src, run, _names(src, declared[1]), written, what, depth + 1))
        elif name in written or name in _declared_in(src, run.body):
            raise _Refused(f"{what} reads `{name}`, which the kernel assigns (line {src.line(run.loop)})")
    return values


def _declared_in(src: KernelSource, node: Node) -> set[str]:
    """Every name a declaration under `node` declares."""
    return {n for d in descendants(node, "declaration") for n in declared_names(src, d)}


def _exit(src: KernelSource, nodes: list[Node], scope: Node) -> str | None:
    """The first way out of `scope` among the statements `nodes` (a `return`, a `goto`, or a `break`/`continue` of
    no loop or switch inside them; a lambda's own are not), said with its line; None where there is none."""
    for top in nodes:
        for node in [top, *descendants(top, *_EXITS, "break_statement", "continue_statement")]:
            if node.type not in (*_EXITS, "break_statement", "continue_statement") or _in_lambda(node, top):
                continue
            if node.type in _EXITS:
                return f"{'leaves the kernel' if node.type == 'return_statement' else 'jumps'} (line {src.line(node)})"
            inner = node.parent
            while inner is not None and inner.id != scope.id and inner.type not in BREAKABLE:
                inner = inner.parent
            if (
                inner is None
                or inner.id == scope.id
                or (node.type == "continue_statement" and inner.type == "switch_statement")
            ):
                return f"leaves its loop early (line {src.line(node)})"
    return None


def _in_lambda(node: Node, top: Node) -> bool:
    """Whether `node` is inside a lambda within `top`."""
    inner = node.parent
    while inner is not None and inner.id != top.id:
        if inner.type == "lambda_expression":
            return True
        inner = inner.parent
    return False


def _offset(src: KernelSource, pointers: Pointers, address: Node, passes: list[_Pass]) -> tuple[str, str] | None:
    """The pointer parameter `address` is based on and the address with that parameter written `@` (local pointers
    set once, and the constants at the top of the pass it is in, replaced by their values); None where it is based on
    no single parameter."""
    values = {name: src.text(value) for name, value in pointers.values.items()}
    for run in passes:
        if run.body.start_byte <= address.start_byte < run.body.end_byte:
            changed = written_names(src, run.body)
            for d in statements_of(run.body):
                declared = single_declaration(d)
                if declared is not None and src.text(declared[0]) not in changed:
                    values[src.text(declared[0])] = src.text(declared[1])
    text = src.text(address)
    if address.type == "subscript_expression":
        array, index = address.child_by_field_name("argument"), address.child_by_field_name("indices")
        text = f"{src.text(array)} + ({src.text(index)[1:-1]})" if array is not None and index is not None else text
    bases: set[str] = set()
    for name in _names(src, address) & pointers.names:
        found = pointers.bases(src, name)
        if found is None:
            return None
        bases |= found
    if len(bases) != 1:
        return None
    for _ in range(8):
        used = [n for n in _WORD.findall(text) if n in values]
        if not used:
            break
        for name in used:
            text = re.sub(rf"(?<![.\w])(?<!->){name}\b", f"({values[name]})", text)
    (base,) = bases
    return base, squeezed(re.sub(rf"(?<![.\w])(?<!->){base}\b", "@", text))


def _shared_names(src: KernelSource) -> set[str]:
    """The kernel's `__shared__` variables and the locals whose every value is based on them (or null)."""
    shared = {n for d in shared_declarations(src) for n in declared_names(src, d)}
    values: dict[str, list[Node]] = {}
    for d in src.in_body("declaration"):
        for declarator in d.children_by_field_name("declarator"):
            if declarator.type == "init_declarator" and (v := declarator.child_by_field_name("value")) is not None:
                for name in declared_names(src, d):
                    values.setdefault(name, []).append(v)
    for a in src.in_body("assignment_expression"):
        left, right = a.child_by_field_name("left"), a.child_by_field_name("right")
        if left is not None and left.type == "identifier" and right is not None:
            values.setdefault(src.text(left), []).append(right)
    changed = True
    while changed:
        changed = False
        for name, vs in values.items():
            if name in shared:
                continue
            if all(src.text(v) in ("nullptr", "NULL", "0") or _names(src, v) & shared for v in vs) and any(
                _names(src, v) & shared for v in vs
            ):
                shared.add(name)
                changed = True
    return shared


def _unwritten(
    src: KernelSource, pointers: Pointers, load: _Load, first: _Pass, readers: list[tuple[_Pass, _Load]]
) -> None:
    """_Refused unless no write from the first pass to the last reader can reach what `load` reads."""
    passes = [first, *(run for run, _ in readers)]
    loaded = _offset(src, pointers, load.address, passes)
    if loaded is None:
        raise _Refused(f"the load at line {src.line(load.node)} reads through no single pointer parameter")
    base, offset = loaded
    if first.index not in _WORD.findall(offset):
        raise _Refused(f"the load at line {src.line(load.node)} reads the same place every round")
    shared = _shared_names(src)
    end = max(run.loop.end_byte for run, _ in readers)
    loads = [(n.start_byte, n.end_byte) for n in (load.node, *(t.node for _, t in readers))]
    region = [
        n
        for n in descendants(src.body, "assignment_expression", "update_expression", "call_expression")
        if first.loop.start_byte <= n.start_byte < end
    ]

    def store(address: Node, line: int) -> None:
        found = _offset(src, pointers, address, passes)
        if found is None:
            raise _Refused(f"line {line} stores through a pointer not known to be a parameter's")
        other, at = found
        restrict = base in pointers.restrict or (other != base and other in pointers.restrict)
        if at != offset and not restrict:
            raise _Refused(
                f"line {line} stores through `{other}` away from the load's element, and `{base}` "
                f"{'is' if other == base else 'may be'} the row it reads"
            )

    for n in region:
        line = src.line(n)
        if n.type == "call_expression":
            callee = "".join(src.field(n, "function").split())
            if callee.split("<")[0] in CASTS or any(a <= n.start_byte and n.end_byte <= b for a, b in loads):
                continue
            args = n.child_by_field_name("arguments")
            arguments = list(args.named_children) if args is not None else []
            method = n.child_by_field_name("function")
            field = (
                method.child_by_field_name("field")
                if method is not None and method.type == "field_expression"
                else None
            )
            if field is not None and _LOAD_METHOD.fullmatch(src.text(field)) and len(arguments) == 1:
                continue  # a read into the thread's pack
            if field is not None and _STORE_METHOD.fullmatch(src.text(field)) and len(arguments) == 1:
                obj = method.child_by_field_name("argument") if method is not None else None
                if _names(src, arguments[0]) & pointers.names and not _names(src, arguments[0]) & shared:
                    store(arguments[0], line)
                elif obj is None or not (_names(src, arguments[0]) & shared):
                    raise _Refused(f"line {line} stores through `{src.text(arguments[0])}`, not known to be memory")
                continue
            if callee.startswith("atomic"):
                raise _Refused(f"line {line} makes an atomic update")
            passed = {name for a in arguments for name in _names(src, a)} & (pointers.names - shared)
            if passed:
                raise _Refused(
                    f"line {line} passes `{sorted(passed)[0]}` to {callee.split('<')[0]}: it may write the row"
                )
            continue
        target = n.child_by_field_name("left" if n.type == "assignment_expression" else "argument")
        if target is None or target.type == "identifier":
            continue
        if target.type == "pointer_expression":
            address = _dereferenced(src, target)
            if not _names(src, address) & shared:
                store(address, line)
            continue
        root = root_variable(target)
        name = src.text(root) if root.type == "identifier" else ""
        if name in shared or (name not in pointers.names and name in _declared_in(src, src.body)):
            continue
        if target.type == "subscript_expression" and name in pointers.names:
            store(target, line)
        else:
            raise _Refused(f"line {line} writes `{src.text(target)}`, not known to be a local or shared")
