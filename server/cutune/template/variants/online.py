"""online_merge: an online softmax's statistics that a loop over rounds reduces over the block every round, kept per
thread instead and merged over the block once, after the loop.

The form read (names are free; `EXP` one of the exp functions, the same throughout):

    for (...) {                                         every thread runs every round (the loop holds a collective)
      ...  T tm = -inf;  for (L) tm = max(tm, X);  ...  the thread's maximum of its elements X this round
      T bm = BlockReduce(...).Reduce(tm, <max op>);     the round's maximum over the block, then its broadcast:
      [if (...) { S = bm; }  __syncthreads();  bm = S;]   only stores of bm, barriers, and bm read back
      if (!isinf(bm)) {                                  the last statement of the round
        T s = 0;  for (L) s += EXP(X - bm);
        T nm = max(run, bm);
        den = den * EXP(run - nm) + s * EXP(bm - nm);
        run = nm;
      }
    }

`run` and `den` are the row's running maximum and each thread's sum of EXP(x - run). The variant drops the per-round
reduction: each thread updates (run, den) by its own round maximum tm, and after the loop the pairs are merged with the
same reduction and broadcast, renamed (`M = max over threads of run`), then `den = isinf(run) ? 0 : den * EXP(run - M)`
and `run = M`. Mathematically every thread ends with the same run and den as in the original (the merge of
(max, sum of exps) pairs is associative; only the float rounding of the rescaled sums differs, as in any reordered
float sum). The original skips a round whose block maximum is infinite: one that is all -inf skips itself in the
variant too (every thread's tm is -inf), and one holding a +inf is skipped by every thread through
`__syncthreads_or(tm == +inf)`, which the variant keeps in the round in place of the reduction (a barrier instead of a
reduction and two barriers; it orders the rounds' shared-memory accesses as the reduction's barriers did). The merge
runs right after the loop, which must be a statement of the kernel's body followed by a block-wide reduction or
barrier of its own that every thread leaving the loop reaches: the merge adds no collective where the kernel has none.
Refused, with the reason, where a round's statements differ from the form, where X is changed between the maximum and
the sum, or where the broadcast's shared slot is read anywhere but in the broadcast (it holds each round's maximum in
the original, only the row's in the variant).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.errors import TransformRefused
from cutune.spec import KernelSpec
from cutune.template.edits import EditList
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.loops import edited_body, kernel_source, line_indent, squeezed, statements_of, sum_terms
from cutune.template.variants.model import Provenance, Transform, Variant

NAME = "online_merge"
SKIP = "cutune_online_skip"
MERGED = "cutune_online_max"
NONE = "no loop reduces a maximum over the block in each round"
_EXP = frozenset({"expf", "__expf", "exp", "exp2f", "__exp2f", "exp2"})
_MAX = frozenset({"fmaxf", "fmax", "max"})
_NEG_INF = re.compile(r"-(?:INFINITY|CUDART_INF_F|HUGE_VALF|(?:[\w:]+::)?numeric_limits<\w+>::infinity\(\))")
_ZERO = re.compile(r"0(?:\.0*)?[fF]?|0?\.0+[fF]?")
_LOOPS = ("for_statement", "while_statement", "do_statement")


class _Refused(Exception):
    """A loop reduces over the block each round, but not in the online form (the message says where)."""


@dataclass(frozen=True)
class _Online:
    """One loop of the form: its round's reduction statements, the update's guard, and the names it uses."""

    loop: Node
    reduction: tuple[Node, ...]  # the block maximum's declaration and its broadcast
    guard: Node
    thread_max: str
    block_max: str
    running_max: str
    total: str
    exp: str


class OnlineMerge(Transform):
    """The per-round block maxima of an online softmax replaced by one merge of the threads' statistics."""

    name = NAME
    chains_onto = False  # it regroups no loop: on another variant's body it would only merge what that one kept

    def apply(self, model: SourceModel, kernel: str, spec: KernelSpec | None) -> Variant:
        src = kernel_source(self.name, model, kernel)
        found: list[_Online] = []
        reasons: list[str] = []
        if b"BlockReduce" not in src.data[src.body.start_byte : src.body.end_byte]:  # the common case, read fast
            raise TransformRefused(self.name, NONE)
        aliases = _aliases(src)
        for loop in src.in_body(*_LOOPS):
            body = loop.child_by_field_name("body")
            if body is None or not any(_block_reduce(src, aliases, s) is not None for s in statements_of(body)):
                continue
            try:
                found.append(_Reader(src, aliases, loop).read())
            except _Refused as e:
                reasons.append(f"the loop at line {src.line(loop)} {e}")
        if reasons:
            raise TransformRefused(self.name, "; ".join(reasons))
        if not found:
            raise TransformRefused(self.name, NONE)
        return Variant(
            name=NAME,
            body=_rewritten(src, found),
            provenance=Provenance(
                self.name, note="each round's block maximum kept per thread, the threads' statistics merged once"
            ),
        )


def _aliases(src: KernelSource) -> dict[str, str]:
    """The kernel's local type aliases (`using BlockReduce = cub::BlockReduce<float, N>;`), name → declaration."""
    return {
        squeezed(src.field(a, "name") or src.field(a, "declarator")): src.text(a)
        for a in src.in_body("alias_declaration", "type_definition")
    }


def _block_reduce(src: KernelSource, aliases: dict[str, str], statement: Node) -> Node | None:
    """The `X(temp).Reduce(v, op)` or `.Sum(v)` call of a cub::BlockReduce (or a local alias of it) in a statement."""
    for call in descendants(statement, "call_expression"):
        fn = call.child_by_field_name("function")
        made = fn.child_by_field_name("argument") if fn is not None and fn.type == "field_expression" else None
        if fn is None or made is None or made.type != "call_expression":
            continue
        maker = squeezed(src.field(made, "function"))
        if src.field(fn, "field") in ("Reduce", "Sum") and "BlockReduce" in aliases.get(maker, maker):
            return call
    return None


def _args(call: Node) -> list[Node]:
    args = call.child_by_field_name("arguments")
    return [a for a in args.named_children if a.type != "comment"] if args is not None else []


def _callee(src: KernelSource, call: Node) -> str:
    """The called function's name without namespace and template arguments."""
    return src.field(call, "function").split("<")[0].split("::")[-1].strip()


def _declared(src: KernelSource, statement: Node) -> tuple[str, Node] | None:
    """(name, value) of a declaration of one initialised variable."""
    if statement.type != "declaration":
        return None
    inits = statement.children_by_field_name("declarator")
    value = inits[0].child_by_field_name("value") if len(inits) == 1 else None
    if value is None or inits[0].type != "init_declarator":
        return None
    return squeezed(src.field(inits[0], "declarator")), value


def _assigned(src: KernelSource, statement: Node) -> tuple[str, str, Node] | None:
    """(target, operator, value) of an expression statement `target OP= value;` with a plain target."""
    expr = (
        statement.named_children[0] if statement.type == "expression_statement" and statement.named_children else None
    )
    if expr is None or expr.type != "assignment_expression":
        return None
    left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
    if left is None or right is None or left.type != "identifier":
        return None
    return src.text(left), src.field(expr, "operator"), right


def _code(node: Node) -> list[Node]:
    """A block's statements, without comments and preprocessor lines (`#pragma unroll`)."""
    return [s for s in statements_of(node) if s.type not in ("comment", "preproc_call")]


class _Reader:
    """Reads one loop that reduces over the block each round as the online form."""

    def __init__(self, src: KernelSource, aliases: dict[str, str], loop: Node) -> None:
        self.src, self.aliases, self.loop = src, aliases, loop

    def refuse(self, what: str, node: Node) -> _Refused:
        return _Refused(f"{what} (line {self.src.line(node)}): not an online softmax's round the rewrite can merge")

    def text(self, node: Node) -> str:
        return squeezed(self.src.text(node))

    def read(self) -> _Online:
        """The loop in the online form; _Refused naming the first statement that differs."""
        src, loop = self.src, self.loop
        body = loop.child_by_field_name("body")
        assert body is not None  # the caller found a reduction in it
        statements = _code(body)
        first = next(i for i, s in enumerate(statements) if _block_reduce(src, self.aliases, s) is not None)
        declared = _declared(src, statements[first])
        call = _block_reduce(src, self.aliases, statements[first])
        assert call is not None
        args = _args(call)
        fn = call.child_by_field_name("function")
        if declared is None or fn is None or src.field(fn, "field") != "Reduce":
            raise self.refuse("reduces over the block otherwise than into a declared maximum", statements[first])
        if len(args) != 2 or "max" not in self.text(args[1]).lower() or args[0].type != "identifier":
            raise self.refuse(f"reduces `{self.text(call)}`, not one value by a maximum", call)
        block_max, thread_max = declared[0], src.text(args[0])
        guard = statements[-1]
        if (
            guard.type != "if_statement"
            or guard.child_by_field_name("alternative") is not None
            or not re.fullmatch(rf"!(?:std::)?isinf\({re.escape(block_max)}\)", squeezed(src.field(guard, "condition")))
        ):
            raise self.refuse(f"does not end with `if (!isinf({block_max})) {{...}}`, a finite maximum's update", guard)
        reduction = tuple(statements[first:-1])
        slots = self.broadcast(reduction[1:], block_max)
        header, lane = self.thread_max(statements[:first], thread_max)
        running_max, total, exp = self.update(guard, block_max, header, lane)
        if thread_max in (running_max, total, *_declared_in(src, guard)):  # the renamed update would read another value
            raise self.refuse(
                f"names `{thread_max}` again in the update, where it would stand for the round's maximum", guard
            )
        for s in statements[:first]:  # the round's own work reads neither statistic
            used = {src.text(n) for n in descendants(s, "identifier")} & {block_max, running_max, total}
            if used:
                raise self.refuse(f"reads `{sorted(used)[0]}` before the round's reduction", s)
        if _declared_in(src, body) & {running_max, total}:
            raise self.refuse("declares the running statistics in the round", loop)
        start, end = reduction[0].start_byte, reduction[-1].end_byte
        for node in descendants(src.body, "identifier", "field_expression", "subscript_expression"):
            if (node.end_byte <= start or node.start_byte >= end) and self.text(node) in slots and not _declares(node):
                raise self.refuse(
                    f"reads `{self.text(node)}` outside the round's broadcast, where it would hold another maximum",
                    node,
                )
        self.merged_where_reduced()
        return _Online(loop, reduction, guard, thread_max, block_max, running_max, total, exp)

    def merged_where_reduced(self) -> None:
        """Refuse unless every thread that leaves the loop reaches a block-wide reduction or barrier of the kernel's
        own right after it (the merge runs there): the loop a statement of the body, a later statement of the body
        holding one, no return between."""
        src, loop = self.src, self.loop
        if loop.parent is None or loop.parent.id != src.body.id:
            raise self.refuse("is not a statement of the kernel's body, where the merge would run", loop)
        for s in src.body.named_children:
            if s.end_byte <= loop.end_byte or s.type in ("comment", "preproc_call"):
                continue
            if descendants(s, "return_statement", "goto_statement", "break_statement"):
                break
            if s.type in ("declaration", "expression_statement") and (
                _block_reduce(src, self.aliases, s) is not None or squeezed(src.text(s)) == "__syncthreads();"
            ):
                return
        raise self.refuse(
            "is not followed by a block-wide reduction every thread reaches, where the merge would run", loop
        )

    def broadcast(self, statements: tuple[Node, ...], block_max: str) -> set[str]:
        """The shared slots the block maximum is broadcast through: `if (C) { S = bm; }`, barriers, `bm = S;`."""
        src = self.src
        slots: set[str] = set()
        barrier = False
        for s in statements:
            if squeezed(src.text(s)) == "__syncthreads();":
                barrier = True
                continue
            if s.type == "if_statement" and s.child_by_field_name("alternative") is None:
                condition = s.child_by_field_name("condition")
                inner = s.child_by_field_name("consequence")
                stores = _code(inner) if inner is not None else []
                if condition is None or descendants(condition, "call_expression", "assignment_expression"):
                    raise self.refuse(f"broadcasts under `{self.text(condition or s)}`", s)
                for store in stores:
                    expr = store.named_children[0] if store.type == "expression_statement" else None
                    left = expr.child_by_field_name("left") if expr is not None else None
                    if (
                        expr is None
                        or left is None
                        or expr.type != "assignment_expression"
                        or src.field(expr, "operator") != "="
                        or squeezed(src.field(expr, "right")) != block_max
                    ):
                        raise self.refuse(f"runs `{self.text(store)[:60]}` in the broadcast", store)
                    slots.add(self.text(left))
                continue
            assigned = _assigned(src, s)
            if (
                assigned is None
                or assigned[0] != block_max
                or assigned[1] != "="
                or self.text(assigned[2]) not in slots
            ):
                raise self.refuse(f"runs `{self.text(s)[:60]}` between the round's reduction and its update", s)
        if slots and not barrier:
            raise self.refuse("broadcasts the round's maximum without a barrier", statements[0])
        return slots

    def thread_max(self, statements: list[Node], thread_max: str) -> tuple[str, str]:
        """(the lane loop's header, X) of the round's `T tm = -inf; for (L) { [X op= ...;] tm = max(tm, X); }`, both
        statements of the round, nothing after them changing what X reads."""
        src = self.src
        where = statements[-1] if statements else self.loop
        declared = [d for s in statements if (d := _declared(src, s)) is not None and d[0] == thread_max]
        if len(declared) != 1 or not _NEG_INF.fullmatch(self.text(declared[0][1])):
            raise self.refuse(f"reduces `{thread_max}`, not a maximum the round starts at -inf", where)
        updates = [
            (i, n)
            for i, s in enumerate(statements)
            for n in descendants(s, "assignment_expression", "update_expression")
            if _target_root(src, n) == thread_max
        ]
        i, update = updates[0] if len(updates) == 1 else (0, None)
        right = update.child_by_field_name("right") if update is not None else None
        lane_loop = statements[i]
        body = lane_loop.child_by_field_name("body")
        step = _code(body) if body is not None else []
        pair = [self.text(a) for a in _args(right)] if right is not None and right.type == "call_expression" else []
        if (
            update is None
            or right is None
            or lane_loop.type != "for_statement"
            or not step
            or update.parent is None
            or update.parent.id != step[-1].id
            or _callee(src, right) not in _MAX
            or len(pair) != 2
            or thread_max not in pair
        ):
            raise self.refuse(
                f"sets `{thread_max}` otherwise than `for (...) {thread_max} = max({thread_max}, x);`", where
            )
        lane = _args(right)[1 - pair.index(thread_max)]
        for st in step[:-1]:  # the lane made first (`x[j] *= scale;`): each statement sets the lane the maximum reads
            made = st.named_children[0] if st.type == "expression_statement" and st.named_children else None
            if (
                made is None
                or made.type != "assignment_expression"
                or self.text(made.child_by_field_name("left") or made) != self.text(lane)
            ):
                raise self.refuse(
                    f"runs `{self.text(st)[:60]}` in the loop taking the maximum, not a step of its lane", st
                )
        read = {src.text(n) for n in descendants(lane, "identifier")} | (
            {src.text(lane)} if lane.type == "identifier" else set()
        )
        for s in statements[i + 1 :]:
            changed = {_target_root(src, n) for n in descendants(s, "assignment_expression", "update_expression")}
            changed |= {_call_root(src, c) for c in descendants(s, "call_expression")}
            if changed & read:
                raise self.refuse(f"changes `{sorted(changed & read)[0]}` after its maximum is taken", s)
        assert body is not None
        return squeezed(src.text(lane_loop)[: body.start_byte - lane_loop.start_byte]), self.text(lane)

    def update(self, guard: Node, block_max: str, header: str, lane: str) -> tuple[str, str, str]:
        """(run, den, EXP) of the update `s = 0; for (L) s += EXP(X - bm); nm = max(run, bm);
        den = den * EXP(run - nm) + s * EXP(bm - nm); run = nm;` (nm may come before the sum)."""
        src = self.src
        inner = guard.child_by_field_name("consequence")
        statements = _code(inner) if inner is not None else []
        if len(statements) != 5:
            raise self.refuse(f"updates in {len(statements)} statements, not the online update's five", guard)
        exps: set[str] = set()

        def exp_of(node: Node, a: str, b: str) -> bool:  # `EXP(a - b)`
            args = _args(node) if node.type == "call_expression" and _callee(src, node) in _EXP else []
            diff = args[0] if len(args) == 1 else None
            if diff is None or diff.type != "binary_expression" or src.field(diff, "operator") != "-":
                return False
            exps.add(_callee(src, node))
            return squeezed(src.field(diff, "left")) == a and squeezed(src.field(diff, "right")) == b

        at: dict[str, int] = {}
        names: dict[str, str] = {}
        for i, s in enumerate(statements):
            declared, assigned = _declared(src, s), _assigned(src, s)
            if declared is not None and _ZERO.fullmatch(self.text(declared[1])):
                at["sum"], names["sum"] = i, declared[0]
            elif declared is not None and declared[1].type == "call_expression" and _callee(src, declared[1]) in _MAX:
                pair = [self.text(a) for a in _args(declared[1])]
                if len(pair) != 2 or block_max not in pair:
                    raise self.refuse(f"takes `{self.text(declared[1])}`, not the new running maximum", s)
                at["new"], names["new"], names["run"] = i, declared[0], pair[1 - pair.index(block_max)]
            elif s.type == "for_statement" and (body := s.child_by_field_name("body")) is not None:
                step = _code(body)
                added = _assigned(src, step[0]) if len(step) == 1 else None
                own = squeezed(src.text(s)[: body.start_byte - s.start_byte])
                if added is None or added[1] != "+=" or own != header or not exp_of(added[2], lane, block_max):
                    raise self.refuse(f"sums otherwise than `for (...) s += EXP({lane} - {block_max});`", s)
                at["terms"], names["terms"] = i, added[0]
            elif assigned is not None and assigned[1] == "=" and assigned[2].type == "identifier":
                at["move"], names["moved"], names["moved_from"] = i, assigned[0], src.text(assigned[2])
            elif assigned is not None and assigned[1] == "=":
                at["total"], names["total"] = i, assigned[0]
            else:
                raise self.refuse(f"runs `{self.text(s)[:60]}` in the online update", s)
        if set(at) != {"sum", "new", "terms", "total", "move"}:
            raise self.refuse("updates otherwise than the online update's five statements", guard)
        run, new, total, partial = names["run"], names["new"], names["total"], names["sum"]
        if names["terms"] != partial or names["moved"] != run or names["moved_from"] != new:
            raise self.refuse("updates other values than the round's sum and the running maximum", guard)
        if not (at["sum"] < at["terms"] < at["total"] and at["new"] < at["total"] < at["move"] == 4):
            raise self.refuse("updates the statistics in another order than the online update", guard)
        if len({run, new, total, partial, block_max}) != 5:
            raise self.refuse("updates one value as two of the statistics", guard)
        combined = _assigned(src, statements[at["total"]])
        assert combined is not None
        terms = sum_terms(src, combined[2])
        products = [p for t in terms if (p := _product(src, t)) is not None]
        seen = {(src.text(v), other) for v, call in products for other in (run, block_max) if exp_of(call, other, new)}
        if len(terms) != 2 or seen != {(total, run), (partial, block_max)}:
            raise self.refuse(
                f"sets `{total}` otherwise than `{total} * EXP({run} - {new}) + {partial} * EXP({block_max} - {new})`",
                statements[at["total"]],
            )
        if len(exps) != 1:
            raise self.refuse(f"mixes exponentials ({', '.join(sorted(exps))})", guard)
        return run, total, exps.pop()


def _declares(identifier: Node) -> bool:
    """Whether an identifier is the name a declaration declares."""
    parent = identifier.parent
    return (
        parent is not None
        and parent.type in ("init_declarator", "declaration")
        and (parent.child_by_field_name("declarator") == identifier)
    )


def _declared_in(src: KernelSource, node: Node) -> set[str]:
    """The names declared under a node."""
    return {src.text(n) for n in descendants(node, "identifier") if _declares(n)}


def _target_root(src: KernelSource, node: Node) -> str:
    """The variable an assignment or increment changes (`a` of `a[i].x += 1`)."""
    target = node.child_by_field_name("left" if node.type == "assignment_expression" else "argument")
    while target is not None and target.type in (
        "subscript_expression",
        "field_expression",
        "parenthesized_expression",
    ):
        target = target.child_by_field_name("argument") or (target.named_children[0] if target.named_children else None)
    return src.text(target) if target is not None and target.type == "identifier" else ""


def _call_root(src: KernelSource, call: Node) -> str:
    """The object a method call may change (`v` of `v.load(p)`), '' for a plain call."""
    fn = call.child_by_field_name("function")
    obj = fn.child_by_field_name("argument") if fn is not None and fn.type == "field_expression" else None
    return src.text(obj) if obj is not None and obj.type == "identifier" else ""


def _product(src: KernelSource, term: Node) -> tuple[Node, Node] | None:
    """(value, EXP call) of a term `value * EXP(...)` (either order)."""
    while term.type == "parenthesized_expression" and term.named_child_count == 1:
        term = term.named_children[0]
    if term.type != "binary_expression" or src.field(term, "operator") != "*":
        return None
    left, right = term.child_by_field_name("left"), term.child_by_field_name("right")
    if left is None or right is None:
        return None
    for value, call in ((left, right), (right, left)):
        if call.type == "call_expression" and _callee(src, call) in _EXP and value.type == "identifier":
            return value, call
    return None


def _renamed(src: KernelSource, start: int, end: int, names: dict[str, str]) -> str:
    """The source text of bytes [start, end) with the identifiers in `names` renamed."""
    pieces, at = [], start
    for node in descendants(src.root, "identifier"):
        if start <= node.start_byte and node.end_byte <= end and src.text(node) in names:
            pieces += [src.data[at : node.start_byte].decode("utf-8"), names[src.text(node)]]
            at = node.end_byte
    pieces.append(src.data[at:end].decode("utf-8"))
    return "".join(pieces)


def _rewritten(src: KernelSource, loops: list[_Online]) -> str:
    """The kernel body with each loop's per-round reduction replaced by the skip test and the merge after the loop."""
    edits = EditList(src.data)
    for k, found in enumerate(loops):
        skip, merged = f"{SKIP}{k}", f"{MERGED}{k}"
        tm, run, den = found.thread_max, found.running_max, found.total
        first, last = found.reduction[0], found.reduction[-1]
        edits.replace(
            first.start_byte, last.end_byte, f"const bool {skip} = __syncthreads_or(isinf({tm}) && {tm} > 0);"
        )
        condition = found.guard.child_by_field_name("condition")
        consequence = found.guard.child_by_field_name("consequence")
        assert condition is not None and consequence is not None
        edits.replace(condition.start_byte, condition.end_byte, f"(!{skip} && !isinf({tm}))")
        edits.replace(
            consequence.start_byte,
            consequence.end_byte,
            _renamed(src, consequence.start_byte, consequence.end_byte, {found.block_max: tm}),
        )
        indent = line_indent(src.data, found.loop.start_byte)
        inner = line_indent(src.data, first.start_byte)
        copied = _renamed(src, first.start_byte, last.end_byte, {found.block_max: merged, tm: run}).split("\n")
        reduction = "\n".join(
            [copied[0], *(ln.removeprefix(inner) and indent + ln.removeprefix(inner) for ln in copied[1:])]
        )
        merge = (
            f"\n{indent}// the threads' (maximum, sum of exps) pairs merged: one block maximum, each sum rescaled to it"
            f"\n{indent}{reduction}"
            f"\n{indent}{den} = isinf({run}) ? 0.0f : {den} * {found.exp}({run} - {merged});"
            f"\n{indent}{run} = {merged};"
        )
        edits.insert(found.loop.end_byte, merge)
    return edited_body(src, edits)
