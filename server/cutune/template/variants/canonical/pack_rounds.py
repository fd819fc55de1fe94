"""pack_rounds: a hand-vectorised loop over the block's rounds, each thread one pack of W consecutive elements a
round and the bounds check inside, read as the stride loop over packs it is.

    const T tid = ...;  const T threads = ...;               the thread's number in the block and the block's size:
    const T rounds = ceil_div(N, W * threads);               `threadIdx.x` and `blockDim.x`; or a constant S, or
    for (T r = 0; r < rounds; ++r) {                         over a (S, warps) block `threadIdx.y * S + threadIdx.x`
      Pack x; x.fill(0.f);                                   and `blockDim.y * S`, where every launch of the kernel
      if ((r * threads + tid) * W < N) x.load(p + (r * threads + tid) * W);   in the file has a block S wide
      for (k < W) acc += x[k] * x[k];
    }
        →   for (T q = tid; q < (N + W - 1) / W; q += threads) { the same body, every pack offset written `q * W` }

The block's size may also be a compile-time count C the kernel's whole-block `cub::BlockReduce<T, C>` fixes
(thread_count.collective_block_sizes), with or without a local holding it: no launch is needed then.

Thread t visits packs q = t + r·threads for r < rounds: every pack below ceil(N / W) once, and past them packs whose
bounds checks all fail. Those padding rounds are dropped, which only holds where they change nothing: outside the
bounds checks the body only declares and fills its own packs (`fill(v)` sets every lane to v, as pack types
do), sets lanes of its own packs and locals, and leaves its accumulators as they are: adds terms that are 0 there
(products and sums of lanes of packs filled with 0), takes the maximum with -inf or the minimum with +inf; anything
else is a refusal that names it. Each pack offset, `(r * threads + tid) * W` or the
terms `r * threads * W + tid * W` of a sum (any order), becomes `q * W`; the round read otherwise is a refusal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.cuda.syntax import int_value
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.recipes.host import HostResolver, launched_block_x
from cutune.template.variants.canonical.guard import compile_time
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.canonical.thread_count import collective_block_sizes
from cutune.template.variants.loops import (
    CEIL_DIV,
    index_form,
    local_values,
    squeezed,
    statements_of,
    sum_terms,
    written_names,
)

NAME = "pack_rounds"
PREFIX = "cutune_packs"
_SHAPE = re.compile(r"\bfor\s*\([^;]*=\s*0\s*;[^;]*;")  # a loop counting from 0
_ROUND_HEAD = re.compile(r"(?:const)?(?:unsigned|unsignedint|int|uint32_t|int32_t|int64_t|size_t)(\w+)=0;?")
_ZERO = re.compile(r"0(?:\.0*)?[fF]?|0?\.0+[fF]?")
_BUILTIN = re.compile(r"(threadIdx|blockDim)\.[xyz]")
_CASTS = ("static_cast", "float", "double", "__half2float", "__bfloat162float")
_EXP = ("expf", "__expf", "exp", "exp2f", "__exp2f")
_INFINITY = re.compile(r"INFINITY|CUDART_INF_F|HUGE_VALF|(?:[\w:]+::)?numeric_limits<\w+>::infinity\(\)")


@dataclass(frozen=True)
class _Threads:
    """How the kernel numbers its threads: the locals holding the thread's number and the block's size, their
    builtin spellings, and the width S the launches must give the block along x (0 where the count is blockDim.x)."""

    ids: frozenset[str]
    counts: frozenset[str]
    start: str
    step: str
    width: int
    width_name: str


class _Refused(Exception):
    """The kernel has the shape, but the reading could change what it does (the message says why)."""


def pack_rounds(model: SourceModel, kernel: str) -> SourceModel | str | None:
    """The model with `kernel`'s counted loops over packs written as stride loops over packs; why not; None when it
    has none."""
    if not _SHAPE.search(kernel_body(model, kernel)):
        return None
    src = KernelSource(model, model.kernel(kernel))
    values = local_values(src)
    written = written_names(src, src.body)
    for threads in _threads(src, values):  # the first numbering whose loops the kernel has
        edits = EditList(src.data)
        reasons: list[str] = []
        for loop in src.in_body("for_statement"):
            try:
                text = _rewrite(src, loop, values, written, threads, f"{PREFIX}{len(edits.edits)}")
            except _Refused as e:
                reasons.append(f"the loop at line {src.line(loop)} {e}")
                continue
            if text is not None:
                edits.replace(loop.start_byte, loop.end_byte, text)
        if reasons:  # the loops over the rounds are read all or none: one left counted leaves the kernel unread
            return "; ".join(reasons)
        if edits.edits and threads.width and (wrong := _launch_mismatch(src, threads)):
            return wrong
        if edits.edits:
            return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)
    return None


def _threads(src: KernelSource, values: dict[str, str]) -> list[_Threads]:
    """The thread numberings the kernel's locals may spell (none without a local thread number and count)."""

    builtins = {k: index_form(v) for k, v in values.items() if _BUILTIN.fullmatch(index_form(v))}

    def builtin(text: str) -> str:  # names holding a builtin written as the builtin
        return index_form(re.sub(r"[A-Za-z_]\w*(?:\.[xyz])?", lambda m: builtins.get(m.group(0), m.group(0)), text))

    forms = {name: builtin(value) for name, value in values.items()}
    found: list[_Threads] = []
    one_d = (
        frozenset(n for n, f in forms.items() if f == "threadIdx.x"),
        frozenset(n for n, f in forms.items() if f == "blockDim.x"),
    )
    for width in sorted(
        {w for f in forms.values() for w in re.findall(r"\b(\w+)\*threadIdx\.y|threadIdx\.y\*(\w+)", f) for w in w if w}
    ):
        number = int_value(width) if int_value(width) is not None else _literal_constexpr(src, width)
        if number is None or not compile_time(src, width):
            continue
        ids = {f"threadIdx.y*{width}+threadIdx.x", f"threadIdx.x+threadIdx.y*{width}"}
        ids |= {f"{width}*threadIdx.y+threadIdx.x", f"threadIdx.x+{width}*threadIdx.y"}
        counts = {f"blockDim.y*{width}", f"{width}*blockDim.y"}
        flat = (
            frozenset(n for n, f in forms.items() if f in ids),
            frozenset(n for n, f in forms.items() if f in counts),
        )
        if flat[0] and flat[1]:
            start, step = "threadIdx.y * blockDim.x + threadIdx.x", "blockDim.x * blockDim.y"
            found.append(_Threads(flat[0], flat[1], start, step, number, width))
    if one_d[0] and one_d[1]:
        found.append(_Threads(one_d[0], one_d[1], "threadIdx.x", "blockDim.x", 0, ""))
    for size in sorted(collective_block_sizes(src)) if one_d[0] else ():  # its cub::BlockReduce fixes the block
        named = frozenset({size, *(n for n, f in forms.items() if f == size)})
        found.append(_Threads(one_d[0], named, "threadIdx.x", "blockDim.x", 0, size))
    for width, number in _constants(src, values).items() if one_d[0] else ():  # `threads = kWarp`: launches tell
        named = frozenset({width, *(n for n, f in forms.items() if f == width)})
        found.append(_Threads(one_d[0], named, "threadIdx.x", "blockDim.x", number, width))
    return found


def _constants(src: KernelSource, values: dict[str, str]) -> dict[str, int]:
    """The compile-time names the locals are set to (`const int threads = kWarp;`), with their literal values."""
    found: dict[str, int] = {}
    for value in values.values():
        number = int_value(value) if int_value(value) is not None else _literal_constexpr(src, value)
        if re.fullmatch(r"[A-Za-z_]\w*", value) and number is not None and compile_time(src, value):
            found[value] = number
    return found


def _literal_constexpr(src: KernelSource, name: str) -> int | None:
    """The value of a `constexpr` local with a literal value."""
    for d in src.in_body("declaration"):
        found = re.fullmatch(rf"[^=]*\bconstexpr\b[^=]*\b{re.escape(name)}\s*=\s*(\w+)\s*;", src.text(d))
        if found is not None:
            return int_value(found.group(1))
    return None


def _launch_mismatch(src: KernelSource, threads: _Threads) -> str:
    """Why the launches do not show every block `threads.width` wide along x ('' when they do)."""
    what = (
        f"numbers its threads `threadIdx.y * {threads.width_name} + threadIdx.x`"
        if "threadIdx.y" in threads.start
        else f"counts {threads.width_name} threads a row"
    )
    launches = launched_block_x(src)
    if not launches:
        return f"{what}, and no launch of {src.kernel.name} in this file says its block is {threads.width} wide"
    for call, x in launches:
        if x is None or HostResolver(src, call).resolve(x).value != threads.width:
            shown = src.text(x) if x is not None else "nothing it can read"
            return f"{what}, but the launch at line {src.line(call)} runs `{shown}` threads along x"
    return ""


def _rewrite(
    src: KernelSource,
    loop: Node,
    values: dict[str, str],
    written: set[str],
    threads: _Threads,
    var: str,
) -> str | None:
    init, cond, update = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    body = loop.child_by_field_name("body")
    if init is None or cond is None or update is None or body is None or body.type != "compound_statement":
        return None
    head = _ROUND_HEAD.fullmatch(squeezed(src.text(init)))
    if head is None or cond.type != "binary_expression" or src.field(cond, "operator") != "<":
        return None
    r = head.group(1)
    if squeezed(src.field(cond, "left")) != r or squeezed(src.text(update)) not in (f"{r}++", f"++{r}", f"{r}+=1"):
        return None
    count = squeezed(src.field(cond, "right"))
    rounds = _rounds(values.get(count, count), threads)
    if rounds is None:
        return None
    length, width = rounds
    moved = sorted(({count, *threads.ids, *threads.counts} | set(re.findall(r"[A-Za-z_]\w*", length))) & written)
    if moved:
        raise _Refused(f"counts rounds over `{moved[0]}`, which the kernel changes")
    reader = _Body(src, r, width, threads, var)
    text = reader.rewritten(body)
    reader.check_padding(body, length)
    typed = re.match(rf"\s*(?:const\s+)?(.*?)\b{r}\s*=", src.text(init), re.DOTALL)
    declared = typed.group(1).strip() if typed is not None and typed.group(1).strip() else "int"
    header = f"for ({declared} {var} = {threads.start}; {var} < (({length}) + ({width}) - 1) / ({width}); "
    return f"{header}{var} += {threads.step}) {text}"


def _rounds(text: str, threads: _Threads) -> tuple[str, str] | None:
    """(N, W) of `ceil_div(N, W * threads)` or `(N + W * threads - 1) / (W * threads)`, W known at compile time."""
    text = squeezed(text)
    call = re.fullmatch(r"([\w:]+)\((.+),(.+)\)", text)
    # a ceiling division helper, by name: a count of rounds at least the ceiling is all the reading needs, more rounds
    # being padding it proves idle (the division itself is read too)
    if call is not None and CEIL_DIV.fullmatch(call.group(1)) and _balanced_split(call.group(2) + "," + call.group(3)):
        length, divisor = call.group(2), call.group(3)
    else:
        division = re.fullmatch(r"\((.+)\+(.+)-1\)/\((.+)\)", text)
        if division is None or squeezed(division.group(2)) != squeezed(division.group(3)):
            return None
        length, divisor = division.group(1), division.group(3)
    factors = squeezed(divisor).split("*")
    counts = [f for f in factors if f in threads.counts]
    if len(factors) != 2 or len(counts) != 1:
        return None
    width = next(f for f in factors if f not in counts)
    return (length, width) if re.fullmatch(r"\w+", width) else None


def _balanced_split(args: str) -> bool:
    """Whether `a,b` splits into exactly two balanced arguments at its one top-level comma."""
    depth, commas = 0, 0
    for c in args:
        depth += {"(": 1, ")": -1}.get(c, 0)
        commas += c == "," and depth == 0
    return commas == 1


class _Body:
    """One loop body: its pack offsets written over the pack, and the proof its padding rounds change nothing."""

    def __init__(self, src: KernelSource, r: str, width: str, threads: _Threads, var: str) -> None:
        self.src, self.r, self.width, self.threads, self.var = src, r, width, threads, var
        self.offsets: set[str] = set()  # body locals holding a pack offset (`const T at = (r * n + t) * W;`)

    def refuse(self, reason: str, node: Node) -> _Refused:
        return _Refused(f"{reason} (line {self.src.line(node)})")

    def rewritten(self, node: Node) -> str:
        """The node's text with every pack offset written `var * W`; a refusal where the round or the thread's
        number is read otherwise."""
        new = self._offset(node)
        if new is not None:
            return new
        if node.type == "identifier" and self.src.text(node) in {self.r, *self.threads.ids}:
            raise self.refuse(f"reads `{self.src.text(node)}` otherwise than in a pack's offset", node)
        if node.type == "init_declarator":
            value = node.child_by_field_name("value")
            if value is not None and self._offset(value) is not None:
                self.offsets.add(self.src.field(node, "declarator").strip())
        if not node.children:
            return self.src.text(node)
        parts, at = [], node.start_byte
        for child in node.children:
            parts += [self.src.data[at : child.start_byte].decode("utf-8"), self.rewritten(child)]
            at = child.end_byte
        parts.append(self.src.data[at : node.end_byte].decode("utf-8"))
        return "".join(parts)

    def _offset(self, node: Node) -> str | None:
        """`var * W` for a pack offset: `(r * n + t) * W`, or a sum with the terms `r * n * W` and `t * W` (the
        other terms kept); None for anything else."""
        if node.type == "parenthesized_expression" and node.named_child_count == 1:
            inner = self._offset(node.named_children[0])
            return f"({inner})" if inner is not None else None
        if node.type != "binary_expression":
            return None
        op = self.src.field(node, "operator")
        if op == "*":
            factors = _factors(self.src, node)
            sums = [f for f in factors if squeezed(self.src.text(f)) != self.width]
            if len(factors) == 2 and len(sums) == 1 and self._is_index(sums[0]):
                return f"{self.var} * {self.width}"
            return None
        if op != "+":
            return None
        terms = sum_terms(self.src, node)
        texts = {t: sorted(_factor_texts(self.src, t)) for t in terms}
        rounds = [t for t in terms if texts[t] == sorted([self.r, *self._count(t), self.width])]
        ids = [t for t in terms if texts[t] == sorted([*self._id(t), self.width])]
        if len(rounds) != 1 or len(ids) != 1:
            return None
        rest = [self.src.text(t) for t in terms if t not in (rounds[0], ids[0])]
        return " + ".join([*rest, f"{self.var} * {self.width}"])

    def _count(self, term: Node) -> list[str]:
        return [f for f in _factor_texts(self.src, term) if f in self.threads.counts][:1]

    def _id(self, term: Node) -> list[str]:
        return [f for f in _factor_texts(self.src, term) if f in self.threads.ids][:1]

    def _is_index(self, node: Node) -> bool:
        """Whether `node` is `r * n + t` (any order): the thread's pack of round r."""
        terms = sum_terms(self.src, node)
        texts = [sorted(_factor_texts(self.src, t)) for t in terms]
        return len(terms) == 2 and any(
            texts[a] == sorted([self.r, c]) and len(texts[1 - a]) == 1 and texts[1 - a][0] in self.threads.ids
            for a in (0, 1)
            for c in self.threads.counts
        )

    # --- the padding rounds ------------------------------------------------------------------------------------

    def check_padding(self, body: Node, length: str) -> None:
        """Refuse unless a round whose every bounds check fails changes nothing outside the body's own values."""
        own = {self.src.field(d, "declarator").strip() for d in descendants(body, "init_declarator")}
        own |= {
            squeezed(self.src.text(d))
            for decl in descendants(body, "declaration")
            for d in decl.children_by_field_name("declarator")
            if d.type == "identifier"
        }
        values: dict[str, str] = {}  # the body's values known in a padding round: "0", "-inf" or "+inf"
        for s in statements_of(body):
            self._padding_statement(s, own, values, length)

    def _padding_statement(self, s: Node, own: set[str], values: dict[str, str], length: str) -> None:
        src = self.src
        if s.type in ("comment", "preproc_call"):
            return
        if s.type == "declaration":
            for d in s.children_by_field_name("declarator"):
                value = d.child_by_field_name("value") if d.type == "init_declarator" else None
                name = src.field(d, "declarator").strip() if d.type == "init_declarator" else squeezed(src.text(d))
                known = self._value(value, values) if value is not None else None
                if known is not None:
                    values[name] = known
            return
        if s.type == "if_statement" and s.child_by_field_name("alternative") is None and self._is_check(s, length):
            return  # every bounds check fails in a padding round
        if s.type == "for_statement":  # a loop over a pack's lanes: its header may change its own index only
            body = s.child_by_field_name("body")
            header = [n for f in ("initializer", "condition", "update") if (n := s.child_by_field_name(f)) is not None]
            counted = {src.field(d, "declarator").strip() for n in header for d in descendants(n, "init_declarator")}
            changed = {name for n in header for name in written_names(src, n)} - counted
            if body is None or changed:
                raise self.refuse(f"changes `{sorted(changed)[0] if changed else '?'}` in a loop's header", s)
            for inner in statements_of(body):
                self._padding_statement(inner, own, values, length)
            return
        expr = s.named_children[0] if s.type == "expression_statement" and s.named_children else None
        if expr is not None and expr.type == "call_expression":  # `x.fill(v)` of a pack of the body's own
            fn = expr.child_by_field_name("function")
            args = _args(expr)
            method = fn if fn is not None and fn.type == "field_expression" else None
            target = method.child_by_field_name("argument") if method is not None else None
            filled = method is not None and src.field(method, "field") == "fill"
            if target is not None and filled and src.text(target) in own and len(args) == 1:
                self._set(values, src.text(target), self._value(args[0], values))
                return
        if expr is not None and expr.type == "assignment_expression" and self._padding_update(expr, own, values):
            return
        raise self.refuse(
            f"runs `{squeezed(src.text(s))[:60]}` in the rounds past the row's end too, which the rewrite cannot show "
            "to change nothing",
            s,
        )

    def _padding_update(self, expr: Node, own: set[str], values: dict[str, str]) -> bool:
        """Whether the assignment, in a padding round, sets a value of the body's own (tracked) or leaves an
        accumulator as it was: `acc += 0`, `acc = fmaxf(acc, -inf)`, `acc = fminf(acc, +inf)`."""
        src = self.src
        left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
        op = src.field(expr, "operator")
        root = left
        while root is not None and root.type in ("subscript_expression", "field_expression"):
            root = root.child_by_field_name("argument")
        name = src.text(root) if root is not None else ""
        if right is None or left is None:
            return False
        value = self._value(right, values)
        if name in own:  # the body's own value: nothing outside the round sees it
            whole = left.type == "identifier" or values.get(name) == value  # one lane set to what the others hold
            if op == "=" and whole:
                self._set(values, name, value)
            elif not (op in ("+=", "-=") and value == "0" and whole):
                values.pop(name, None)
            return True
        if left.type != "identifier":
            return False
        if op in ("+=", "-="):
            return value == "0"
        if op == "=" and right.type == "call_expression":
            args = _args(right)
            neutral = {"max": "-inf", "min": "+inf"}.get(_extremum(src, right), "")
            others = [a for a in args if squeezed(src.text(a)) != name]
            return len(args) == 2 and len(others) == 1 and bool(neutral) and self._value(others[0], values) == neutral
        return False

    @staticmethod
    def _set(values: dict[str, str], name: str, value: str | None) -> None:
        if value is None:
            values.pop(name, None)
        else:
            values[name] = value

    def _is_check(self, s: Node, length: str) -> bool:
        """Whether `s` tests `OFFSET < N`, the pack's offset in the row (or a body local holding it) below N."""
        cond = s.child_by_field_name("condition")
        test = cond.named_children[0] if cond is not None and cond.named_children else None
        while test is not None and test.type == "parenthesized_expression" and test.named_child_count == 1:
            test = test.named_children[0]
        if test is None or test.type != "binary_expression" or self.src.field(test, "operator") != "<":
            return False
        left = test.child_by_field_name("left")
        if left is None or squeezed(self.src.field(test, "right")) != squeezed(length):
            return False
        offset = self._offset(left)
        return squeezed(self.src.text(left)) in self.offsets or (
            offset is not None and squeezed(offset) == squeezed(f"{self.var}*{self.width}")
        )

    def _value(self, node: Node, values: dict[str, str]) -> str | None:
        """What the expression is in a padding round when the body's values are `values`: "0", "-inf", "+inf", or
        None when not known (through casts, parentheses, lanes, sums and products of zeros, extrema and pack makers
        of equal arguments, and exp of -inf)."""
        src = self.src
        while True:
            if node.type == "parenthesized_expression" and node.named_child_count == 1:
                node = node.named_children[0]
            elif node.type == "cast_expression" and (cast := node.child_by_field_name("value")) is not None:
                node = cast
            elif node.type == "call_expression" and _callee(src, node) in _CASTS and len(converted := _args(node)) == 1:
                node = converted[0]
            else:
                break
        text = squeezed(src.text(node))
        if node.type == "number_literal":
            return "0" if _ZERO.fullmatch(text) else None
        if _INFINITY.fullmatch(text):
            return "+inf"
        if node.type == "unary_expression" and src.field(node, "operator") == "-":
            operand = node.child_by_field_name("argument")
            negated = self._value(operand, values) if operand is not None else None
            return {"0": "0", "+inf": "-inf", "-inf": "+inf"}.get(negated or "")
        if node.type in ("identifier", "subscript_expression", "field_expression"):
            root: Node | None = node
            while root is not None and root.type in ("subscript_expression", "field_expression"):
                root = root.child_by_field_name("argument")
            return values.get(src.text(root)) if root is not None else None
        if node.type == "binary_expression":
            sides = [
                self._value(n, values)
                for n in (node.child_by_field_name("left"), node.child_by_field_name("right"))
                if n is not None
            ]
            return "0" if src.field(node, "operator") in ("*", "+", "-") and sides == ["0", "0"] else None
        if node.type == "call_expression":
            known = [self._value(a, values) for a in _args(node)]
            callee = _callee(src, node)
            if callee in _EXP and known == ["-inf"]:
                return "0"
            if (_extremum(src, node) or callee.startswith("make_")) and known and len(set(known)) == 1:
                return known[0]
        return None


def _callee(src: KernelSource, call: Node) -> str:
    """The called function's name without namespace and template arguments."""
    fn = call.child_by_field_name("function")
    return src.text(fn).split("<")[0].split("::")[-1].strip() if fn is not None else ""


def _extremum(src: KernelSource, call: Node) -> str:
    """ "max" or "min" for a call of a maximum or minimum function, else ''."""
    return {"fmaxf": "max", "fmax": "max", "max": "max", "fminf": "min", "fmin": "min", "min": "min"}.get(
        _callee(src, call), ""
    )


def _args(call: Node) -> list[Node]:
    args = call.child_by_field_name("arguments")
    return [a for a in args.named_children if a.type != "comment"] if args is not None else []


def _factors(src: KernelSource, node: Node) -> list[Node]:
    """The factors of a product, through nested products and parentheses."""
    if node.type == "parenthesized_expression" and node.named_child_count == 1:
        inner = node.named_children[0]
        if inner.type == "binary_expression" and src.field(inner, "operator") == "*":
            return _factors(src, inner)
        return [node]
    if node.type == "binary_expression" and src.field(node, "operator") == "*":
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is not None and right is not None:
            return [*_factors(src, left), *_factors(src, right)]
    return [node]


def _factor_texts(src: KernelSource, node: Node) -> list[str]:
    return [squeezed(src.text(f)) for f in _factors(src, node)]
