"""vectorize: stride loops over contiguous elements read and write VEC_BYTES-wide packs.

A subscript `a[base + i]` of a stride loop over `i` (base invariant in the loop, `a` a pointer the loop
does not change) is contiguous: thread-wise pack `p` covers `i` in [p·V, p·V + V). So is an access whose
address, read through the body's plain locals, is a flattened 2-D index `a[f(i / n) + i % n]` (address.py),
when `n % V == 0` at run time (else the scalar loop does all the work); of one array, both halves
`a[f(q) + r]` and `a[f(q) + r + n]` of a row may be written, and so may planes `a[i + k * n]` of a loop `i < n` at
different constants k (a byte's codes unpacked into planes: the planes never meet). Calls of small `__device__`
helpers in the loop are inlined first (inline.py), so their accesses count as the loop's. The loop becomes a loop over
packs (PACKS of them per iteration, all loaded before any is computed), in which the original
body runs once per element with each contiguous subscript replaced by its pack's element; a scalar loop
finishes the tail. Whether every pack start is aligned is checked at run time: when one is not, the
scalar loop does all the work, so any pointer offset stays correct. Other uses of `i` keep working (it is
still defined per element); an array written through a pack must have no other access in the loop. A pack
is read ahead (and stored back) only where the original touches its memory anyway: some access of it runs on
every iteration, or the conditions its accesses run under test values only; one whose condition may be what keeps
the address valid (it names the array, a null pointer check, or compares what the address is computed from, as
`if (row >= rows) continue;` does) stays scalar.

A body that branches on the kernel's template parameters (`if (IS_NEOX)`, in a helper inlined into the loop too:
an interleaved layout in one arm, halves in the other) is also read one arm at a time, as each instantiation runs
one: the variant is `if constexpr (C) {...} else {...}`, each arm packed where it can be and as written where not,
where that packs more than the body read whole.

When no thread or block index is used outside the loops it rewrites, the loops cover their range with
any block size, so the variant may also launch fewer threads (BLOCK_DIV): with V elements per pack,
V times fewer threads have the same work to do. When the loops are grid-stride and the grid means nothing
else, it may launch fewer blocks instead (GRID_DIV), keeping the block: fewer, fuller blocks, each thread with
more packs in flight (PACKS).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.errors import TransformRefused
from cutune.spec import KernelSpec
from cutune.template.edits import EditList
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.address import Address, LoopIndex
from cutune.template.variants.constexpr_arms import Arms, branched, template_arms
from cutune.template.variants.inline import inline_helpers
from cutune.template.variants.loops import (
    StrideLoop,
    declared_names,
    divided_launch,
    edited_body,
    indented,
    kernel_source,
    line_indent,
    loop_blockers,
    required_stride_loops,
    squeezed,
    stride_loops,
    written_names,
)
from cutune.template.variants.model import Provenance, Transform, Variant

NAME = "vectorized"
_PREFIX = "cutune_vec"
_BRANCHES = (
    "if_statement",
    "conditional_expression",
    "for_statement",
    "while_statement",
    "do_statement",
    "case_statement",
)
_EXITS = ("continue_statement", "break_statement", "return_statement")
_LOADS = ("__ldg", "__ldcs", "__ldcg", "__ldca", "__ldlu", "__ldcv")
HELPERS = f"""\
// cutune: a pack of CutuneN elements, loaded and stored as one aligned access (variants vectorized, flat_rows)
template <int CutuneN, typename CutuneE>
struct alignas(sizeof(CutuneE) * CutuneN) {_PREFIX}_t {{
  CutuneE v[CutuneN];
}};
template <int CutuneN, typename CutuneE>
__device__ __forceinline__ {_PREFIX}_t<CutuneN, CutuneE> {_PREFIX}_load(const CutuneE* p) {{
  return *reinterpret_cast<const {_PREFIX}_t<CutuneN, CutuneE>*>(p);
}}
template <int CutuneN, typename CutuneE>
__device__ __forceinline__ void {_PREFIX}_store(CutuneE* p, const {_PREFIX}_t<CutuneN, CutuneE>& pack) {{
  *reinterpret_cast<{_PREFIX}_t<CutuneN, CutuneE>*>(p) = pack;
}}"""


@dataclass
class _Pack:
    """One contiguous access stream of a loop: array, base offset, and how the body uses it."""

    array: str
    base: str
    name: str
    nodes: list[Node]  # the subscripts (or `__ldg(&a[...])` calls) that become the pack's element
    read: bool = False
    written: bool = False
    conditional_write: bool = False
    address: Address | None = None  # a 2-D (or local-resolved) access; None: `array[base + i]`
    always: bool = False  # some access of it runs on every iteration: the original touches its memory
    guards: list[Node] = field(default_factory=list)  # the conditions its other accesses run under

    def at(self, index: LoopIndex, p: str, vec: str, var_type: str) -> str:
        """The pointer to the pack's first element at pack index `p`."""
        if self.address is None:
            return f"&{self.array}[({self.base}) + {p} * {vec}]"
        return index.at(self.address, f"static_cast<{var_type}>({p} * {vec})")

    def checks(self, index: LoopIndex, vec: str, var_type: str) -> list[str]:
        """Run-time conditions under which every pack start is aligned (and packs never cross a row)."""
        size = f"sizeof({self.array}[0]) * {vec}"
        if self.address is None:
            return [f"reinterpret_cast<unsigned long long>(&{self.array}[{self.base}]) % ({size}) == 0"]
        starts = ["0"]
        checks = []
        if self.address.modulus is not None:
            n = self.address.modulus_text
            checks = [f"({n}) > 0", f"({n}) % {vec} == 0"]
            if self.address.rows:  # linear in the row: aligned in rows 0 and 1, aligned in all
                starts.append(n)
        for start in starts:
            pointer = index.at(self.address, f"static_cast<{var_type}>({start})")
            checks.append(f"reinterpret_cast<unsigned long long>({pointer}) % ({size}) == 0")
        return checks


@dataclass(frozen=True)
class _Packed:
    """A body with its packing loops rewritten: which loops (their positions), how many access streams in all."""

    body: str
    loops: tuple[int, ...]
    streams: int
    note: str = ""


class Vectorize(Transform):
    name = "vectorize"

    def apply(self, model: SourceModel, kernel: str, spec: KernelSpec | None) -> Variant:
        original = kernel_source(self.name, model, kernel)
        first_loops = required_stride_loops(self.name, original)
        inlined = inline_helpers(model, kernel)
        src = kernel_source(self.name, inlined.model, kernel) if inlined.calls else original
        # inlining edits only inside the loops: the same loops, in the same order, at the original's lines
        loops = stride_loops(src)[0] if inlined.calls else first_loops
        same = len(first_loops) == len(loops)
        lines = [original.line(old.node) for old in first_loops] if same else [src.line(lp.node) for lp in loops]
        packed = self._rewritten(src, loops, lines)
        arms = template_arms(src)
        if isinstance(arms, Arms):  # each instantiation runs one arm: pack each, where that packs more
            by_arms = self._by_arms(src, loops, lines, arms)
            if isinstance(by_arms, _Packed) and (isinstance(packed, str) or by_arms.streams > packed.streams):
                packed = by_arms
            elif isinstance(packed, str) and isinstance(by_arms, str):
                packed = f"{packed}; {by_arms}"
        if isinstance(packed, str):
            kept = f" (helper calls kept: {'; '.join(inlined.refusals)})" if inlined.refusals else ""
            raise TransformRefused(self.name, packed + kept)
        body, done, note = packed.body, packed.loops, packed.note
        params = [
            TunableParam(
                "VEC_BYTES", (8, 16), 16, Binding.TEMPLATE, description="bytes per vector load/store (vectorized)"
            ),
            TunableParam("PACKS", (1, 2, 4), 1, Binding.TEMPLATE, description="packs per thread per iteration"),
        ]
        divided, launch = divided_launch(src, [loops[k] for k in done], "", " (vectorized)")
        params += divided
        at = ", ".join(str(lines[k]) for k in done)
        inlined_note = f"; {inlined.calls} helper call(s) inlined" if inlined.calls else ""
        return Variant(
            name=NAME,
            body=body,
            params=tuple(params),
            launch=launch,
            helpers=HELPERS,
            provenance=Provenance(
                self.name, note=f"packed loads and stores in the loop(s) at line {at}{inlined_note}{note}"
            ),
        )

    def _rewritten(self, src: KernelSource, loops: list[StrideLoop], lines: list[int]) -> _Packed | str:
        """The body with each loop that packs rewritten; else why none does."""
        edits = EditList(src.data)
        done: list[int] = []
        streams = 0
        refusals: list[str] = []
        for k, loop in enumerate(loops):
            blocker = loop_blockers(src, loop)
            index = LoopIndex(src, loop)
            packs = self._packs(src, loop, index) if blocker is None else blocker
            if isinstance(packs, str):
                refusals.append(f"the loop at line {lines[k]} {packs}")
                continue
            new = indented(
                self._rewrite(src, loop, packs, index, len(done)), line_indent(src.data, loop.node.start_byte)
            )
            edits.replace(loop.node.start_byte, loop.node.end_byte, new.lstrip())
            done.append(k)
            streams += len(packs)
        if not done:
            return "; ".join(refusals)
        return _Packed(edited_body(src, edits), tuple(done), streams)

    def _by_arms(self, src: KernelSource, loops: list[StrideLoop], lines: list[int], arms: Arms) -> _Packed | str:
        """The body as `if constexpr (C) {...} else {...}`, each arm (the body the instantiations where the template
        parameters' condition C holds, or not, run) packed where it can be and as written where not; why not where
        neither arm packs. Its launch is the whole body's (`divided_launch` of the loops of `src`): it holds for
        both arms."""
        bodies: list[str] = []
        done: set[int] = set()
        streams = 0
        reasons: list[str] = []
        as_written: list[str] = []  # the values whose arm packs nothing
        for value, arm in zip(("true", "false"), arms.models, strict=True):
            arm_src = kernel_source(self.name, arm, src.kernel.name)
            arm_loops = stride_loops(arm_src)[0]
            if len(arm_loops) != len(loops):  # a loop inside a discarded arm: the loops are not the body's
                return f"the arms of `{arms.condition}` hold different loops"
            result = self._rewritten(arm_src, arm_loops, lines)
            if isinstance(result, str):
                reasons.append(f"where `{arms.condition}` is {value}: {result}")
                as_written.append(value)
                bodies.append(edited_body(arm_src, EditList(arm_src.data)))
            else:
                bodies.append(result.body)
                done |= set(result.loops)
                streams = max(streams, result.streams)
        if not done:
            return "; ".join(reasons)
        joined = branched(arms, bodies[0], bodies[1])
        body = "\n".join(line.rstrip() for line in joined.split("\n"))  # the arms' blanked code leaves spaces
        note = f"; each arm of `{arms.condition}` on its own" + (
            f", the one where it is {as_written[0]} as written" if as_written else ""
        )
        return _Packed(body, tuple(sorted(done)), streams, note)

    def _packs(self, src: KernelSource, loop: StrideLoop, index: LoopIndex) -> list[_Pack] | str:
        """The loop's contiguous access streams, or why it has none it can pack safely."""
        declared = declared_names(src, loop.body)
        written = written_names(src, loop.body)
        has_continue = bool(descendants(loop.body, "continue_statement"))
        packs: dict[tuple[str, str], _Pack] = {}
        scalar: dict[str, Node] = {}
        why: list[str] = []  # why each access left scalar is not contiguous
        for access, parts in _accesses(src, loop.body):
            if not index.depends(access):
                continue
            array_node = parts[0]
            array = src.text(array_node)
            base = _base(src, parts[1], loop.var) if len(parts) == 2 else None
            address: Address | None = None
            # read ahead only what the loop always reads; a plain `a[base + i]` under a condition joins a pack that
            # some access of every iteration touches (checked below), as the original touches that memory anyway
            guards = _guards(access, loop.body)
            if guards and (array_node.type != "identifier" or base is None):
                scalar.setdefault(array, access)
                why.append(f"{src.text(access)}: is accessed only under a condition")
                continue
            if (
                array_node.type != "identifier"
                or base is None
                or array in declared
                or array in written
                or (set(_words(base)) & (declared | written))
            ):
                found = index.address(parts)
                if isinstance(found, str):
                    scalar.setdefault(array, access)
                    why.append(f"{src.text(access)}: {found}")
                    continue
                address, array, base = found, found.root, ""
            key = (array, address.key if address is not None else squeezed(base))
            pack = packs.setdefault(key, _Pack(array, base, f"{_PREFIX}_{len(packs)}", [], address=address))
            node, role = use_of(src, access)
            if role == "address":
                return f"takes the address of {src.text(access)} (line {src.line(access)}) other than to load it"
            pack.nodes.append(node)
            pack.always = pack.always or not guards
            pack.guards += guards
            if role in ("read", "update"):
                pack.read = True
            if role in ("write", "update"):
                pack.written = True
                if has_continue or not unconditional(node, loop.body):
                    pack.conditional_write = True
        for key, pack in list(packs.items()):
            unsafe = None if pack.always else _address_guard(src, pack, loop.var)
            if unsafe is not None:  # where it is false the original never touches that memory: it stays scalar
                del packs[key]
                scalar.setdefault(pack.array, pack.nodes[0])
                why.append(f"{src.text(pack.nodes[0])}: is accessed only where `{src.text(unsafe)}` holds")
        if not packs:
            flat = f"a[base + {loop.var}]` (nor `a[f({loop.var} / n) + {loop.var} % n]`)"
            return f"has no contiguous subscript `{flat}" + (f" ({why[0]})" if why else "")
        for (array, _), pack in packs.items():
            if not pack.written:
                continue
            others = [p for (a, _), p in packs.items() if a == array and p is not pack]
            if any(not _disjoint(pack, other, loop.bound) for other in others) or array in scalar:
                return f"writes {array} as a pack and also accesses it otherwise: packs could overlap"
        return list(packs.values())

    def _rewrite(self, src: KernelSource, loop: StrideLoop, packs: list[_Pack], where: LoopIndex, index: int) -> str:
        """The vectorized loop, its alignment check and its scalar tail, as one block statement."""
        var, vt = loop.var, loop.var_type or "long long"
        n, vec, done = f"{_PREFIX}_n{index}", f"{_PREFIX}_w{index}", f"{_PREFIX}_done{index}"
        count, p0, p, u, j = (f"{_PREFIX}_{x}{index}" for x in ("packs", "p0", "p", "u", "j"))
        first = packs[0]
        elem = f"{first.array}[0]"
        body = _replaced(src, loop.body, packs, u, j)
        aligned = f"{_PREFIX}_aligned{index}"
        checks = list(dict.fromkeys(c for k in packs for c in k.checks(where, vec, vt)))
        tail = f"{vt} {var} = static_cast<{vt}>({done} + ({loop.start}))"
        out = [
            "{  // cutune: vectorized loop, VEC_BYTES per access, PACKS packs per iteration, scalar tail",
            f"  constexpr int {vec} = VEC_BYTES / sizeof({elem}) > 0 ? VEC_BYTES / sizeof({elem}) : 1;",
            f"  const long long {n} = {loop.bound};",
            f"  long long {done} = 0;",
            f"  const bool {aligned} = {' && '.join(checks)};",
            f"  if ({aligned}) {{",
            f"    const long long {count} = {n} / {vec};",
            f"    for (long long {p0} = {loop.start}; {p0} < {count}; {p0} += (long long)({loop.step}) * PACKS) {{",
        ]
        for k in packs:
            out.append(f"      decltype({_PREFIX}_load<{vec}>(&{k.array}[0])) {k.name}[PACKS];")
        loads = [k for k in packs if k.read or k.conditional_write]
        if loads:
            out += [
                "#pragma unroll",
                f"      for (int {u} = 0; {u} < PACKS; ++{u}) {{",
                f"        const long long {p} = {p0} + {u} * (long long)({loop.step});",
                f"        if ({p} < {count}) {{",
                *(f"          {k.name}[{u}] = {_PREFIX}_load<{vec}>({k.at(where, p, vec, vt)});" for k in loads),
                "        }",
                "      }",
            ]
        out += [
            "#pragma unroll",
            f"      for (int {u} = 0; {u} < PACKS; ++{u}) {{",
            f"        const long long {p} = {p0} + {u} * (long long)({loop.step});",
            f"        if ({p} < {count}) {{",
            "#pragma unroll",
            f"          for (int {j} = 0; {j} < {vec}; ++{j}) {{",
            f"            const {vt} {var} = static_cast<{vt}>({p} * {vec} + {j});",
            indented(body, "            "),
            "          }",
            *(
                f"          {_PREFIX}_store<{vec}>({k.at(where, p, vec, vt)}, {k.name}[{u}]);"
                for k in packs
                if k.written
            ),
            "        }",
            "      }",
            "    }",
            f"    {done} = {count} * {vec};",
            "  }",
            f"  for ({tail}; {var} < {loop.bound}; {var} += {loop.step}) "
            + indented(src.text(loop.body), "  ").lstrip(),
            "}",
        ]
        return "\n".join(out)


def use_of(src: KernelSource, sub: Node) -> tuple[Node, str]:
    """The node to replace for a subscript and how it is used: read, write, update (both) or address."""
    parent = sub.parent
    if parent is not None and parent.type == "pointer_expression" and src.text(parent).startswith("&"):
        call = parent.parent.parent if parent.parent is not None else None
        if (
            call is not None
            and call.type == "call_expression"
            and src.field(call, "function") in _LOADS
            and parent.parent is not None
            and len(parent.parent.named_children) == 1
        ):
            return call, "read"
        return sub, "address"
    if parent is not None and parent.type == "assignment_expression" and parent.child_by_field_name("left") == sub:
        return sub, "write" if src.field(parent, "operator") == "=" else "update"
    if parent is not None and parent.type == "update_expression":
        return sub, "update"
    return sub, "read"


def _after_an_exit(node: Node, body: Node) -> bool:
    """Whether a `continue`, `break` or `return` of the loop `body` comes before `node`: an iteration may leave
    before it (`if (row >= rows) continue;`)."""
    return any(e.start_byte < node.start_byte and _leaves(e, body) for e in descendants(body, *_EXITS))


def _guards(node: Node, body: Node) -> list[Node]:
    """What `node` runs under in the loop `body` (none: it runs on every iteration): the conditions of the `if`s and
    `?:`s around it (not where it is the condition, which runs either way) and of the loops around it (a `case`:
    the case itself), the left sides of the `&&`/`||` it is the right side of, and those of each exit before it
    (a bare exit: the exit itself)."""
    found: list[Node] = []
    child, current = node, node.parent
    while current is not None and current != body:
        condition = current.child_by_field_name("condition")
        decided = current.type in ("if_statement", "conditional_expression") and child == condition
        if current.type in _BRANCHES and not decided:
            found.append(condition if condition is not None else current)
        operator = current.child_by_field_name("operator") if current.type == "binary_expression" else None
        left = current.child_by_field_name("left")
        if operator is not None and operator.type in ("&&", "||") and left is not None and child != left:
            found.append(left)
        child, current = current, current.parent
    for exit in descendants(body, *_EXITS):
        if exit.start_byte < node.start_byte and _leaves(exit, body):
            found += _guards(exit, body) or [exit]
    return found


def _address_guard(src: KernelSource, pack: _Pack, var: str) -> Node | None:
    """Of the conditions a pack's accesses run under (none of which runs on every iteration), one that may be what
    keeps its address valid: it names the array (`if (out)`, a null pointer) or compares what the address is
    computed from (`row < rows`); None when each tests only values (`if (mask[i])`), so loading and storing back
    the pack (its memory valid wherever the loop runs) changes nothing the original leaves alone."""
    names = {pack.array, var, *_words(pack.base)} | (set(_words(pack.array)) if pack.address is not None else set())
    for guard in pack.guards:
        if guard.type in _EXITS:
            return guard  # an exit with no condition of its own: nothing after it runs
        if pack.array in {src.text(i) for i in descendants(guard, "identifier")}:
            return guard
        for comparison in descendants(guard, "binary_expression"):
            operator = comparison.child_by_field_name("operator")
            compares = operator is not None and operator.type in ("<", "<=", ">", ">=", "==", "!=")
            if compares and _compared_names(src, comparison) & names:
                return guard
    return None


def _compared_names(src: KernelSource, comparison: Node) -> set[str]:
    """The names a comparison reads as numbers: not those inside a subscript (`x[i] > 0` tests a value)."""
    names = set()
    for ident in descendants(comparison, "identifier"):
        current = ident.parent
        while current is not None and current != comparison and current.type != "subscript_expression":
            current = current.parent
        if current is None or current == comparison:
            names.add(src.text(ident))
    return names


def _leaves(exit: Node, body: Node) -> bool:
    """Whether `exit` ends the iteration of the loop `body` (a `continue` or `break` of a loop or switch nested in
    it ends only that one's)."""
    nested = ("for_statement", "for_range_loop", "while_statement", "do_statement")
    current = exit.parent
    while current is not None and current != body:
        if exit.type != "return_statement" and (
            current.type in nested or (exit.type == "break_statement" and current.type == "switch_statement")
        ):
            return False
        current = current.parent
    return True


def unconditional(node: Node, body: Node) -> bool:
    """Whether `node` is in an expression statement that runs on every iteration of the loop `body`: the
    statement is the body, or only plain `{ }` blocks enclose it up to the body, and no exit comes before it."""
    if _after_an_exit(node, body):
        return False
    statement: Node | None = node
    while statement is not None and statement.type != "expression_statement":
        statement = statement.parent
    if statement is None or statement == body:
        return statement is not None
    current = statement.parent
    while current is not None and current.type == "compound_statement" and current != body:
        current = current.parent
    return current == body


def always_runs(node: Node, body: Node) -> bool:
    """Whether `node` is evaluated on every iteration of the loop `body` (no branch, loop or short circuit
    between them, no exit before it)."""
    return not _guards(node, body)


def _disjoint(a: _Pack, b: _Pack, bound: str) -> bool:
    """Whether two packs of one array never share an element: the two halves of a 2-D row; or planes `a[i + k * n]`
    of a loop `i < n` at different constants k (an index from 0 to n - 1 reaches n elements from each offset, so
    offsets a whole multiple of n apart reach none in common; a bound below 1 runs no iteration)."""
    if a.address is not None or b.address is not None:
        return a.address is not None and b.address is not None and a.address.overlaps_nothing_of(b.address)
    k, m = _planes(a.base, bound), _planes(b.base, bound)
    return k is not None and m is not None and k != m


def _planes(base: str, bound: str) -> int | None:
    """`base` as a constant times the name `bound` (`0`, `n`, `n * 2`, `3 * n`), the constant; None otherwise."""
    base, bound = squeezed(base), squeezed(bound)
    if not re.fullmatch(r"[A-Za-z_]\w*", bound):
        return None
    if base == "0":
        return 0
    if base == bound:
        return 1
    found = re.fullmatch(rf"(?:{bound}\*(\d+)|(\d+)\*{bound})", base)
    return int(found.group(1) or found.group(2)) if found else None


def _accesses(src: KernelSource, body: Node) -> list[tuple[Node, tuple[Node, ...]]]:
    """The memory accesses under `body`: each subscript `a[x]` as (node, (a, x)), each load intrinsic or
    dereference of a pointer expression `__ldg(p + x)`, `*(p + x)` as (node, (pointer,))."""
    found: list[tuple[Node, tuple[Node, ...]]] = []
    for node in descendants(body, "subscript_expression", "call_expression", "pointer_expression"):
        if node.type == "subscript_expression":
            array, indices = node.child_by_field_name("argument"), node.child_by_field_name("indices")
            if array is not None and indices is not None and len(indices.named_children) == 1:
                found.append((node, (array, indices.named_children[0])))
        elif node.type == "call_expression":
            args = node.child_by_field_name("arguments")
            if src.field(node, "function") in _LOADS and args is not None and len(args.named_children) == 1:
                pointer = args.named_children[0]
                if not (pointer.type == "pointer_expression" and src.text(pointer).startswith("&")):
                    found.append((node, (pointer,)))
        elif src.text(node).startswith("*") and node.child_by_field_name("argument") is not None:
            found.append((node, (node.child_by_field_name("argument"),)))  # type: ignore[arg-type]
    return found


def _base(src: KernelSource, index: Node, var: str) -> str | None:
    """For an index `var`, `base + var` or `var + base` (var not in base): base ("0" for bare var)."""
    while index.type == "parenthesized_expression" and index.named_child_count == 1:
        index = index.named_children[0]
    if index.type == "identifier" and src.text(index) == var:
        return "0"
    if index.type != "binary_expression" or src.field(index, "operator") != "+":
        return None
    left, right = index.child_by_field_name("left"), index.child_by_field_name("right")
    if left is None or right is None:
        return None
    for mine, other in ((right, left), (left, right)):
        if squeezed(src.text(mine)) == var and var not in _identifiers(src, other):
            return src.text(other)
    return None


def _identifiers(src: KernelSource, node: Node) -> set[str]:
    return {src.text(n) for n in descendants(node, "identifier")}


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z_]\w*", text)


def _replaced(src: KernelSource, body: Node, packs: list[_Pack], u: str, j: str) -> str:
    """The loop body's text with each packed access replaced by its pack's element."""
    edits = [(n, f"{k.name}[{u}].v[{j}]") for k in packs for n in k.nodes]
    pieces: list[str] = []
    pos = body.start_byte
    for node, text in sorted(edits, key=lambda e: e[0].start_byte):
        pieces += [src.data[pos : node.start_byte].decode(), text]
        pos = node.end_byte
    pieces.append(src.data[pos : body.end_byte].decode())
    text = "".join(pieces)
    return text if body.type == "compound_statement" else "{ " + text + " }"
