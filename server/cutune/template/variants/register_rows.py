"""A row kept in registers by counted loops: each thread holds its elements of the row in local arrays
(`float vals[NORM_REG]`), filled and reused by loops over the thread's rounds of the block, the last, partial
round apart:

    int iterations = N / S;                          S the block size (`blockDim.x`), T the thread index
    int high = iterations * S + T;                   (`threadIdx.x`), either written through locals
    for (int i = 0; i < iterations; i++) BODY        memory at `i * S + T`, the arrays at `[i]`
    if (high < N) { BODY at high and [iterations] [iterations++;] }

read as the block-stride loops `for (int i = T; i < N; i += blockDim.x) BODY` they are, with every array at `[i]`.
Or a fixed count C of rounds (a template parameter: as many as the launch picked for the row), each with the bounds
check inside, the row's pointers moved to the thread's first element (a warp per row, S the warp):

    p += row * N + T;                                p += row * N;
    for (int i = 0; i < C; i++) {                    for (int i = T; i < min(N, C * S); i += blockDim.x)
      int idx = T + i * S;                     →       BODY (`idx` and `T + i * S` written `i`, `p[i * S]` as `p[i]`)
      if (idx < N) BODY
    }

where S is `blockDim.x` or what every launch of the kernel in the file gives as the block's x size.
Thread T's k-th element of the row is the one at `T + k·S`, and `arr[k]` holds it: every loop over the rounds
with its tail visits the thread's elements in that order. An `iterations++` closing a tail makes the later loops over
`iterations` run over every element of the thread, tail included, until `iterations = N / S;` sets it back.

Where S is a compile-time constant (a literal, an integer macro, a template parameter), a thread of the variant holds
`ceil(size * S / ROW_THREADS)` of the row's elements, so the variant may run any number of threads a row; else only
as many as the original's launch gives it.

The arrays then stand for values of the row's elements, never for memory: row_reduce keeps each one as the register
cache of a row that is never loaded nor stored. The text this module writes is row_reduce's reading of the kernel
only (an array at `[i]` of a stride loop is out of its bounds as C++), never a kernel of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tree_sitter import Node

from cutune.errors import TransformRefused
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.recipes.host import launched_block_x
from cutune.template.variants.loops import (
    constant_names,
    declaration_names,
    index_form,
    local_values,
    rewritten,
    squeezed,
    statements_of,
    sum_terms,
    written_names,
)

_ROUND = re.compile(r"(?:const)?(?:int|unsigned|unsignedint|int32_t|uint32_t)(\w+)=0;?")


ROW_THREADS = "ROW_THREADS"  # row_reduce's threads per row, which a thread's share of the row depends on


@dataclass(frozen=True)
class RegisterRow:
    """The file with a kernel's counted loops over register arrays read as block-stride loops, and the arrays."""

    text: str
    # array → (element type, the elements of a row a thread holds: its size as written, or in ROW_THREADS' terms)
    arrays: dict[str, tuple[str, str]]


def register_rows(src: KernelSource, transform: str) -> RegisterRow | None:
    """The kernel's loops over its register arrays as block-stride loops over the row; None when it keeps no row in
    local arrays by counted loops; TransformRefused where it does but a reading could change what it does."""
    statements = [c for c in src.body.named_children if c.type != "comment"]
    arrays = _arrays(src, statements)
    rounds = [s for s in statements if _round(src, s, arrays) is not None]
    counts = {r[1] for s in rounds if (r := _round(src, s, arrays)) is not None}
    if not arrays:
        return None
    # a count the body declares (the rounds of the block over a row); a loop over any other count (`UNROLL`, a
    # template parameter) is a fixed number of rounds a thread, each with its bounds check inside or not this shape
    if not any(_divided(src, s, count) for s in statements for count in counts):
        return _Checked(src, transform, statements, arrays).read(counts)
    # every loop over the rounds, with or without an array in it (one may read the row straight from memory)
    rounds = [s for s in statements if (r := _round(src, s, {})) is not None and r[1] in counts]
    return _Reader(src, transform, statements, arrays).read(rounds)


def _arrays(src: KernelSource, statements: list[Node]) -> dict[str, tuple[str, str]]:
    """The top-level local arrays without initialiser (`float vals[NORM_REG];`), not __shared__: name → (type, size)."""
    found: dict[str, tuple[str, str]] = {}
    for s in statements:
        declarators = s.children_by_field_name("declarator") if s.type == "declaration" else []
        if len(declarators) != 1 or declarators[0].type != "array_declarator":
            continue
        if any(src.text(c) in ("__shared__", "extern", "static") for c in s.children):
            continue
        name, size = declarators[0].child_by_field_name("declarator"), declarators[0].child_by_field_name("size")
        if name is not None and size is not None and name.type == "identifier":
            found[src.text(name)] = (src.field(s, "type"), src.text(size))
    return found


def _round(src: KernelSource, loop: Node, arrays: dict[str, tuple[str, str]]) -> tuple[str, str] | None:
    """(round index, count) of `for (int i = 0; i < count; i++)` indexing one of `arrays` by `i` (any loop of that
    form, where `arrays` is empty), else None."""
    if loop.type != "for_statement":
        return None
    init, cond, update = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    head = _ROUND.fullmatch(squeezed(src.text(init))) if init is not None else None
    if head is None or cond is None or update is None:
        return None
    i = head.group(1)
    count = re.fullmatch(rf"{i}<(\w+)", squeezed(src.text(cond)))
    if count is None or squeezed(src.text(update)) not in (f"{i}++", f"++{i}", f"{i}+=1"):
        return None
    body = loop.child_by_field_name("body")
    subscripts = descendants(body, "subscript_expression") if body is not None else []
    if arrays and not any(_subscript(src, sub) in ((a, i) for a in arrays) for sub in subscripts):
        return None
    return i, count.group(1)


def _divided(src: KernelSource, s: Node, count: str) -> bool:
    """Whether `s` declares `count` as a quotient (`int count = n / s;`)."""
    for d in s.children_by_field_name("declarator") if s.type == "declaration" else []:
        value = d.child_by_field_name("value")
        if squeezed(src.field(d, "declarator")) == count and value is not None and value.type == "binary_expression":
            return src.field(value, "operator") == "/"
    return False


def _subscript(src: KernelSource, sub: Node) -> tuple[str, str]:
    """(array, index) of `a[i]`, as squeezed texts."""
    return squeezed(src.field(sub, "argument")), squeezed(src.field(sub, "indices").strip()[1:-1])


class _Reader:
    """Reads one kernel's loops over the rounds and writes them as stride loops (the edits of the file's text)."""

    def __init__(
        self, src: KernelSource, transform: str, statements: list[Node], arrays: dict[str, tuple[str, str]]
    ) -> None:
        self.src = src
        self.transform = transform
        self.statements = statements
        self.arrays = arrays
        values = local_values(src)  # locals declared once and never written
        self.strides = {"blockDim.x"} | {k for k, v in values.items() if index_form(v) == "blockDim.x"}
        self.threads = {"threadIdx.x"} | {k for k, v in values.items() if index_form(v) == "threadIdx.x"}
        self.values = values
        self.edits = EditList(src.data)

    def refuse(self, reason: str, node: Node) -> TransformRefused:
        return TransformRefused(self.transform, f"{reason} (line {self.src.line(node)})")

    def read(self, rounds: list[Node]) -> RegisterRow:
        src = self.src
        counts = {r[1] for loop in rounds if (r := _round(src, loop, self.arrays)) is not None}
        if len(counts) > 1:
            raise self.refuse(
                f"the loops over the register arrays count to different bounds ({sorted(counts)})", rounds[0]
            )
        count = counts.pop()
        declared = next((s for s in self.statements if count in set(declaration_names(src, s))), None)
        length = self._length(declared, count) if declared is not None else None
        if declared is None or length is None:
            raise self.refuse(
                f"`{count}` is not the number of whole rounds of the block over a row (`n / blockDim.x`)", rounds[0]
            )
        if len(set(declaration_names(src, declared))) > 1:
            raise self.refuse(f"declares `{count}` beside other names", declared)
        read = {src.text(i) for i in descendants(declared, "identifier")}
        moved = sorted((written_names(src, src.body) - {count}) & read)
        if moved:  # the row's length, or the block size it is divided by, changes on the way
            raise self.refuse(f"changes `{moved[0]}`, which `{count}` is counted from", declared)
        position = self.statements.index(declared)
        for s in self.statements[:position]:
            if self._mentions(s, set(self.arrays)) and not self._declares(s, set(self.arrays)):
                raise self.refuse("uses a register array before it counts the rounds", s)
        self.edits.replace(declared.start_byte, declared.end_byte, "")
        highs = self._highs(count)
        whole = False  # whether `count` counts the thread's partial round too (after `count++` closed a tail)
        i = position + 1
        while i < len(self.statements):
            s = self.statements[i]
            if s in rounds:
                i, whole = self._loop(i, count, highs, length, whole)
                continue
            if self._is_reset(s, count, length):
                whole = False
            elif self._declares(s, {count, *highs}):
                if whole:
                    raise self.refuse("takes the thread's last element after the count has changed", s)
            elif self._mentions(s, {count, *highs, *self.arrays}) and not self._declares(s, set(self.arrays)):
                raise self.refuse(
                    f"uses `{count}`, its last element or a register array outside the loops over the rounds", s
                )
            else:
                i += 1
                continue
            self.edits.replace(s.start_byte, s.end_byte, "")  # a count, a last element or a reset: read away
            i += 1
        for s in self.statements:
            if self._declares(s, set(self.arrays)):
                self.edits.replace(s.start_byte, s.end_byte, "")
        return RegisterRow(apply_edits(src.model.text, self.edits.edits), dict(self.arrays))

    def _loop(self, at: int, count: str, highs: set[str], length: str, whole: bool) -> tuple[int, bool]:
        """The loop at statement `at` (and its tail) written as one block-stride loop: the statement after them and
        whether `count` then counts the partial round too."""
        loop = self.statements[at]
        var = (_round(self.src, loop, {}) or ("", ""))[0]
        body = self._body(loop, var, count, highs)
        tail = self.statements[at + 1] if at + 1 < len(self.statements) else None
        read = self._tail(tail, count, highs, length) if tail is not None else None
        end, after = loop.end_byte, at + 1
        if tail is not None and read is not None:
            if whole:
                raise self.refuse("a tail after a loop that already counts the thread's last elements", tail)
            statements, counted = read
            if _bare(self._tail_text(statements, count, highs, var)) != _bare(body):
                raise self.refuse("the tail does not do to the last element what the loop does to the others", tail)
            whole = counted
            end, after = tail.end_byte, at + 2
        elif not whole:
            raise self.refuse(
                f"the loop over `{count}` rounds leaves the thread's last, partial round undone "
                "(no tail `if (high < n)` after it)",
                loop,
            )
        stride_loop = f"for (int {var} = threadIdx.x; {var} < {length}; {var} += blockDim.x) {{\n{body}\n}}"
        self.edits.replace(loop.start_byte, end, stride_loop)
        return after, whole

    def _length(self, declared: Node, count: str) -> str | None:
        """N of `int count = N / S;`, S the block size."""
        for d in descendants(declared, "init_declarator"):
            if squeezed(self.src.field(d, "declarator")) != count:
                continue
            value = d.child_by_field_name("value")
            if value is None or value.type != "binary_expression" or self.src.field(value, "operator") != "/":
                return None
            if squeezed(self.src.field(value, "right")) not in self.strides:
                return None
            return self.src.field(value, "left")
        return None

    def _highs(self, count: str) -> set[str]:
        """The locals that are the thread's element after the whole rounds: `count * S + T` (any order)."""
        forms = self._element_forms(count)
        return {k for k, v in self.values.items() if index_form(v) in forms}

    def _element_forms(self, var: str) -> set[str]:
        """`var * S + T` in index form, every order, for every spelling of S and T."""
        return {
            f"{a}+{b}" if first else f"{b}+{a}"
            for s in self.strides
            for t in self.threads
            for a in (f"{var}*{s}", f"{s}*{var}")
            for b in (t,)
            for first in (True, False)
        }

    def _is_reset(self, s: Node, count: str, length: str) -> bool:
        text = squeezed(self.src.text(s)).rstrip(";")
        return any(text == f"{count}={squeezed(length)}/{stride}" for stride in self.strides)

    def _tail(self, s: Node, count: str, highs: set[str], length: str) -> tuple[list[Node], bool] | None:
        """The statements of `if (high < N) ...` and whether it ends with `count++`, else None."""
        if s.type != "if_statement" or s.child_by_field_name("alternative") is not None:
            return None
        cond = s.child_by_field_name("condition")
        then = s.child_by_field_name("consequence")
        if cond is None or then is None:
            return None
        test = _bare(self.src.text(cond))[1:-1]  # squeezed would read `(high) < n` as a cast
        if not any(test in (f"{h}<{_bare(length)}", f"({h})<{_bare(length)}") for h in highs):
            return None
        statements = statements_of(then)
        last = squeezed(self.src.text(statements[-1])).rstrip(";") if statements else ""
        return statements, last in (f"{count}++", f"++{count}", f"{count}+=1")

    def _tail_text(self, statements: list[Node], count: str, highs: set[str], var: str) -> str:
        """The tail's statements with the last element written as the loop's element, `count++` taken off."""
        last = statements[-1] if statements else None
        if last is not None and squeezed(self.src.text(last)).rstrip(";") in (
            f"{count}++",
            f"++{count}",
            f"{count}+=1",
        ):
            statements = statements[:-1]
        return "\n".join(self._rewritten(s, lambda n: self._tail_edit(n, count, highs, var)) for s in statements)

    def _tail_edit(self, node: Node, count: str, highs: set[str], var: str) -> str | None:
        text = index_form(self.src.text(node))
        if node.type == "identifier" and text in highs:
            return var
        if (element := self._element(node, count, var)) is not None:
            return element
        if node.type == "subscript_expression":
            array, index = _subscript(self.src, node)
            if array in self.arrays and index == count:
                return f"{array}[{var}]"
        if node.type == "identifier" and text == count:
            raise self.refuse(f"the tail reads `{count}` otherwise than as a register array's index", node)
        if node.type == "identifier" and text in self.arrays:
            raise self.refuse(f"the tail reads the register array `{text}` off its element", node)
        return None

    def _element(self, node: Node, rounds: str, var: str) -> str | None:
        """A sum `base + rounds * S + T` (terms in any order and grouping) written `base + var`, the element's
        index in the row; None when `node` is no such sum."""
        if node.type != "binary_expression" or self.src.field(node, "operator") != "+":
            return None
        terms = sum_terms(self.src, node)
        steps = [
            t
            for t in terms
            if index_form(self.src.text(t))
            in {f"{rounds}*{s}" for s in self.strides} | {f"{s}*{rounds}" for s in self.strides}
        ]
        threads = [t for t in terms if index_form(self.src.text(t)) in self.threads]
        if len(steps) != 1 or len(threads) != 1:
            return None
        rest = [self.src.text(t) for t in terms if t not in (steps[0], threads[0])]
        return " + ".join([*rest, var])

    def _body(self, loop: Node, var: str, count: str, highs: set[str]) -> str:
        body = loop.child_by_field_name("body")
        assert body is not None  # _round read it
        statements = statements_of(body)

        def edit(node: Node) -> str | None:
            if (element := self._element(node, var, var)) is not None:
                return element
            if node.type == "subscript_expression":
                array, index = _subscript(self.src, node)
                if array in self.arrays and index == var:
                    return f"{array}[{var}]"
            if node.type == "identifier" and self.src.text(node) == var:
                raise self.refuse(
                    f"reads the round `{var}` otherwise than in `{var} * blockDim.x + threadIdx.x` or as an index "
                    "of a register array",
                    node,
                )
            if node.type == "identifier" and self.src.text(node) in {count, *highs}:
                raise self.refuse(f"reads `{self.src.text(node)}` inside the loop over the rounds", node)
            if node.type == "identifier" and self.src.text(node) in self.arrays:
                raise self.refuse(f"reads the register array `{self.src.text(node)}` off the round's element", node)
            return None

        return "\n".join(self._rewritten(s, edit) for s in statements)

    def _rewritten(self, node: Node, edit: Callable[[Node], str | None]) -> str:
        return rewritten(self.src, node, edit)

    def _mentions(self, s: Node, names: set[str]) -> bool:
        return any(self.src.text(i) in names for i in descendants(s, "identifier"))

    def _declares(self, s: Node, names: set[str]) -> bool:
        return s.type == "declaration" and bool(set(declaration_names(self.src, s)) & names)


def _bare(text: str) -> str:
    return "".join(text.split())


class _Checked:
    """Reads a kernel's loops over a fixed count of rounds, each with its bounds check inside, as stride loops."""

    def __init__(
        self, src: KernelSource, transform: str, statements: list[Node], arrays: dict[str, tuple[str, str]]
    ) -> None:
        self.src, self.transform, self.statements, self.arrays = src, transform, statements, arrays
        self.values = local_values(src)
        self.threads = {"threadIdx.x"} | {k for k, v in self.values.items() if index_form(v) == "threadIdx.x"}
        self.edits = EditList(src.data)
        self.moved: dict[str, Node] = {}  # pointer → its move to the thread's first element (`p += row * n + t;`)
        self.offsets: set[str] = set()  # the locals holding such a move's offset

    def refuse(self, reason: str, node: Node) -> TransformRefused:
        return TransformRefused(self.transform, f"{reason} (line {self.src.line(node)})")

    def read(self, counts: set[str]) -> RegisterRow | None:
        src = self.src
        loops = [s for s in self.statements if (r := _round(src, s, {})) is not None and r[1] in counts]
        shapes = [self._shape(loop) for loop in loops]
        if not any(shapes):
            return None
        for loop, shape in zip(loops, shapes, strict=True):
            if shape is None:
                raise self.refuse("a loop over the rounds has no bounds check `if (idx < n)` as all it does", loop)
        bounds = {squeezed(src.text(shape[3])) for shape in shapes if shape is not None}
        strides = {shape[2] for shape in shapes if shape is not None}
        if len(bounds) > 1 or len(strides) > 1:
            raise self.refuse("the loops over the rounds check different bounds or step differently", loops[0])
        stride = strides.pop()
        self._check_stride(stride, loops[0])
        written = written_names(src, src.body)
        for loop, shape in zip(loops, shapes, strict=True):
            assert shape is not None
            var, count = _round(src, loop, {}) or ("", "")
            idx, _, _, bound, guarded = shape
            if {count, *re.findall(r"[A-Za-z_]\w*", src.text(bound))} & written:
                raise self.refuse("the rounds or the row's length change on the way", loop)
            self._moves(loop)
            body = self._body(guarded, var, idx, stride)
            text = f"for (int {var} = threadIdx.x; {var} < min({src.text(bound)}, ({count}) * ({stride})); "
            self.edits.replace(loop.start_byte, loop.end_byte, f"{text}{var} += blockDim.x) {{\n{body}\n}}")
        self._check_moves(loops)
        for s in self.statements:
            if s in loops:
                continue
            if s.type == "declaration" and set(declaration_names(src, s)) & set(self.arrays):
                self.edits.replace(s.start_byte, s.end_byte, "")
            elif any(src.text(i) in self.arrays for i in descendants(s, "identifier")):
                raise self.refuse("uses a register array outside the loops over the rounds", s)
        return RegisterRow(apply_edits(src.model.text, self.edits.edits), self._per_thread(stride))

    def _per_thread(self, stride: str) -> dict[str, tuple[str, str]]:
        """The arrays with their sizes as a variant's thread needs them: a thread of the original holds `size`
        elements of rows of up to `size * S`; where S is a compile-time constant (a literal, a macro of the file, a
        template parameter), a thread of ROW_THREADS holds `ceil(size * S / ROW_THREADS)` of them, so any thread
        count keeps the row; else only as many threads as the original's can."""
        if not (stride.isdigit() or stride in constant_names(self.src)):
            return dict(self.arrays)
        return {
            name: (kind, f"(({size}) * ({stride}) + {ROW_THREADS} - 1) / {ROW_THREADS}")
            for name, (kind, size) in self.arrays.items()
        }

    def _shape(self, loop: Node) -> tuple[str, Node, str, Node, Node] | None:
        """(idx, the element's form `T + i * S`, S, N, the checked statement) of a round's body `int idx = T + i * S;
        if (idx < N) STATEMENT` (or the form in the check itself); None for any other body."""
        src = self.src
        var = (_round(src, loop, {}) or ("", ""))[0]
        body = loop.child_by_field_name("body")
        statements = statements_of(body) if body is not None else []
        if not statements or statements[-1].type != "if_statement":
            return None
        check = statements[-1]
        if check.child_by_field_name("alternative") is not None:
            return None
        forms: dict[str, Node] = {}
        for d in statements[:-1]:
            declarators = d.children_by_field_name("declarator") if d.type == "declaration" else []
            value = declarators[0].child_by_field_name("value") if len(declarators) == 1 else None
            if value is None or self._stride_of(value, var) is None:
                return None
            forms[src.field(declarators[0], "declarator").strip()] = value
        cond = check.child_by_field_name("condition")
        test = cond.named_children[0] if cond is not None and cond.named_children else None
        then = check.child_by_field_name("consequence")
        if test is None or then is None or test.type != "binary_expression" or src.field(test, "operator") != "<":
            return None
        left, bound = test.child_by_field_name("left"), test.child_by_field_name("right")
        if left is None or bound is None:
            return None
        form = forms.get(src.text(left).strip(), left)
        stride = self._stride_of(form, var)
        if stride is None:
            return None
        idx = src.text(left).strip() if src.text(left).strip() in forms else ""
        return idx, form, stride, bound, then

    def _stride_of(self, node: Node, var: str) -> str | None:
        """S of the element `T + var * S` (either order), T the thread's index; None for anything else."""
        terms = sum_terms(self.src, node)
        if len(terms) != 2:
            return None
        for t, product in (terms, terms[::-1]):
            if index_form(self.src.text(t)) not in self.threads:
                continue
            factors = squeezed(self.src.text(product)).split("*")
            if len(factors) == 2 and var in factors:
                return factors[1 - factors.index(var)]
        return None

    def _check_stride(self, stride: str, at: Node) -> None:
        """S must be the block's x size: `blockDim.x`, or what every launch in the file gives it."""
        if index_form(self.values.get(stride, stride)) == "blockDim.x":
            return
        launches = launched_block_x(self.src)
        if not launches:
            raise self.refuse(
                f"steps by {stride}, and no launch of {self.src.kernel.name} in this file says its block is as wide",
                at,
            )
        for call, x in launches:
            if x is None or squeezed(self.src.text(x)) != squeezed(stride):
                shown = self.src.text(x) if x is not None else "nothing it can read"
                raise self.refuse(f"steps by {stride}, but the launch at line {self.src.line(call)} runs `{shown}`", at)

    def _moves(self, loop: Node) -> None:
        """Record (and write as the row's start) each prologue move of a pointer to the thread's first element."""
        src = self.src
        for s in self.statements[: self.statements.index(loop)]:
            expr = s.named_children[0] if s.type == "expression_statement" and s.named_children else None
            if expr is None or expr.type != "assignment_expression" or src.field(expr, "operator") != "+=":
                continue
            pointer, offset = src.field(expr, "left").strip(), expr.child_by_field_name("right")
            if offset is None or pointer in self.moved:
                continue
            held = self._declaration(src.text(offset).strip()) if offset.type == "identifier" else None
            value = held.child_by_field_name("value") if held is not None else offset
            terms = sum_terms(src, value) if value is not None else []
            threads = [t for t in terms if index_form(src.text(t)) in self.threads]
            if len(threads) != 1 or len(terms) < 2:
                continue
            rest = [t for t in terms if t is not threads[0]]
            if any("threadIdx" in index_form(src.text(t)) or src.text(t).strip() in self.threads for t in rest):
                continue
            assert value is not None
            self.moved[pointer] = s
            if value.start_byte not in {e.span.start_byte for e in self.edits.edits}:
                self.edits.replace(value.start_byte, value.end_byte, " + ".join(src.text(t) for t in rest))
            if held is not None:
                self.offsets.add(src.text(offset).strip())

    def _declaration(self, name: str) -> Node | None:
        """The init declarator of the top-level local `name`."""
        for s in self.statements:
            for d in s.children_by_field_name("declarator") if s.type == "declaration" else []:
                if d.type == "init_declarator" and self.src.field(d, "declarator").strip() == name:
                    return d
        return None

    def _check_moves(self, loops: list[Node]) -> None:
        """The moved pointers and their offsets are read nowhere but in the moves and the rounds' elements."""
        moves = set(self.moved.values())
        for s in self.statements:
            if s in loops or s in moves:
                continue
            for ident in descendants(s, "identifier"):
                name = self.src.text(ident)
                declares = s.type == "declaration" and name in set(declaration_names(self.src, s))
                if name in self.moved or (name in self.offsets and not declares):
                    raise self.refuse(f"reads `{name}`, moved to the thread's first element, outside the rounds", s)

    def _body(self, guarded: Node, var: str, idx: str, stride: str) -> str:
        src = self.src
        elements = {f"{var}*{stride}", f"{stride}*{var}"}

        def edit(node: Node) -> str | None:
            if node.type == "identifier" and idx and src.text(node) == idx:
                return var
            if node.type == "binary_expression" and self._stride_of(node, var) == stride:
                return var
            if node.type == "subscript_expression":
                array, index = _subscript(src, node)
                if array in self.arrays and index == var:
                    return f"{array}[{var}]"
                if array in self.moved and index_form(index) in elements:
                    return f"{array}[{var}]"
                if array in self.moved:
                    raise self.refuse(f"reads `{array}` otherwise than at the round's element `{var} * {stride}`", node)
            if node.type == "identifier" and src.text(node) == var:
                raise self.refuse(f"reads the round `{var}` otherwise than in the element or a register array", node)
            return None

        return "\n".join(rewritten(src, s, edit) for s in statements_of(guarded))  # the loop's body is its block
