"""thread_packs: a thread's short loop over consecutive elements (`for (l = 0; l < 4; ++l) { y[l] = f(q[l]);
y[l + 32] = g(q[l]); }`, a dequantiser's 4 weights from 4 packed bytes) read and written as whole packs: each array
the loop reads at `Q[l + c]` loaded as one pack before it, each array it writes at `A[l + c]` kept in registers and
stored as one pack after it (16-byte chunks at most; the element by element form where an address is not aligned).

Per-thread loads and stores of 1 or 2 bytes fill the memory instruction queues long before the memory is busy; once
block_items has filled the SM with threads, they are what the warps wait on (ncu: `mio_throttle`, `lg_throttle`).
The pack's elements are the loop's, each computed by the loop's own expression; what changes is when they are read
and written: every read before the loop, every write after it. That is the original's result only where no read
can see a write of the loop: each array written is reached from a `__restrict__` parameter (nothing else in the
kernel reaches that memory) and the loop reads through no pointer based on that parameter (an in-place update would
read what it wrote), the arrays written take their `l + c` elements once each with no two streams of one array
overlapping, and the expressions call nothing but casts (a call could read or write memory the rewrite moved). An
array read under a condition (an arm of `?:`, the right of `&&` or `||`) is read element by element as written: a
pack would read past an end the condition guards. The loop's count is a compile-time constant (a literal, a local
constant, the file's macro), a power of two up to 16, counted from a start the loop does not change and that calls
and reads nothing (`l0`, `l < l0 + 4`).

THREAD_PACKS (a template argument) picks the packed loops (1) or the kernel as written (0, the default), so other
transforms also apply to this variant's body (block_items chains onto it: more threads in flight, then fewer memory
instructions each).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.access import CASTS
from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.spec import KernelSpec
from cutune.template.edits import EditList
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.butterfly import int_value, texts_names
from cutune.template.variants.loops import (
    edited_body,
    kernel_source,
    line_indent,
    local_values,
    squeezed,
    with_pragma,
    written_names,
)
from cutune.template.variants.model import Provenance, Transform, Variant
from cutune.template.variants.pointers import Pointers
from cutune.template.variants.reroll import rerolled

NAME = "thread_packs"
PACKS = "THREAD_PACKS"
PREFIX = "cutune_tp"
_COUNTS = (2, 4, 8, 16)
# an integer type, spelled with its spaces (`unsigned int`); the longer names first
_INDEX_TYPES = r"(?:unsigned\s+int|unsigned|int64_t|int32_t|uint64_t|uint32_t|int|size_t|long\s+long|long)"

HELPERS = """\
#ifndef CUTUNE_THREAD_PACKS_HELPERS
#define CUTUNE_THREAD_PACKS_HELPERS
// cutune thread_packs: N consecutive elements of a thread moved as chunks of up to 16 aligned bytes
template <typename CutuneE>
__device__ CutuneE cutune_tp_elem(const CutuneE*);
template <typename CutuneE, int CutuneN>
struct cutune_tp_chunks {
  static constexpr int bytes = int(sizeof(CutuneE)) * CutuneN < 16 ? int(sizeof(CutuneE)) * CutuneN : 16;
  static constexpr int elems = bytes / int(sizeof(CutuneE));
  // whole chunks of a power-of-two size: else the elements move one by one
  static constexpr bool whole = elems > 0 && (bytes & (bytes - 1)) == 0 &&
                                elems * int(sizeof(CutuneE)) == bytes && CutuneN % elems == 0;
  struct alignas(bytes) chunk { CutuneE v[elems]; };
  __device__ static bool aligned(const void* p) { return reinterpret_cast<unsigned long long>(p) % bytes == 0; }
};
template <int CutuneN, typename CutuneE>
__device__ __forceinline__ void cutune_tp_store(CutuneE* p, const CutuneE (&v)[CutuneN]) {
  using Q = cutune_tp_chunks<CutuneE, CutuneN>;
  if constexpr (Q::whole) {
    if (Q::aligned(p)) {
#pragma unroll
      for (int c = 0; c < CutuneN / Q::elems; ++c) {
        typename Q::chunk t;
#pragma unroll
        for (int k = 0; k < Q::elems; ++k) t.v[k] = v[c * Q::elems + k];
        reinterpret_cast<typename Q::chunk*>(p)[c] = t;
      }
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < CutuneN; ++k) p[k] = v[k];
}
template <int CutuneN, typename CutuneE>
__device__ __forceinline__ void cutune_tp_load(CutuneE (&v)[CutuneN], const CutuneE* p) {
  using Q = cutune_tp_chunks<CutuneE, CutuneN>;
  if constexpr (Q::whole) {
    if (Q::aligned(p)) {
#pragma unroll
      for (int c = 0; c < CutuneN / Q::elems; ++c) {
        const typename Q::chunk t = reinterpret_cast<const typename Q::chunk*>(p)[c];
#pragma unroll
        for (int k = 0; k < Q::elems; ++k) v[c * Q::elems + k] = t.v[k];
      }
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < CutuneN; ++k) v[k] = p[k];
}
#endif
"""


@dataclass(frozen=True)
class _Stream:
    array: str
    offset: int  # c of `array[l + c]`
    accesses: tuple[Node, ...]  # the subscripts of the loop that are this stream


class ThreadPacks(Transform):
    """A thread's short loops over consecutive elements read and written as whole packs."""

    name = NAME
    chainable = True

    def apply(self, model: SourceModel, kernel: str, spec: KernelSpec | None) -> Variant:
        """The variant of `kernel` with its short per-thread loops packed, or TransformRefused saying why not."""
        src = kernel_source(self.name, model, kernel)
        rolled = rerolled(src)  # hand-unrolled runs of element stores read as the loops they unroll
        if rolled is not None:
            model = parse_source(rolled, model.path, rewrite=True)
            src = kernel_source(self.name, model, kernel)
        names = texts_names(model, spec.include_dirs if spec is not None else ())
        names = {**names, **_local_constants(src, names)}
        pointers = Pointers.of(src)
        edits = EditList(src.data)
        reasons: list[str] = []
        packed = 0
        for loop in src.in_body("for_statement"):
            try:
                text = self._packed(src, loop, names, pointers, f"{PREFIX}{packed}_")
            except _Refused as e:
                reasons.append(f"the loop at line {src.line(loop)} {e}")
                continue
            if text is None:
                continue
            start = with_pragma(src, loop)
            indent = line_indent(src.data, start)
            original = src.data[start : loop.end_byte].decode()
            edits.replace(
                start,
                loop.end_byte,
                f"if constexpr ({PACKS}) {{\n{_indented(text, indent + '  ')}\n{indent}}} else {{\n{indent}  "
                + original.replace("\n", "\n  ")
                + f"\n{indent}}}",
            )
            packed += 1
        if not packed:
            reason = "; ".join(reasons) if reasons else "no short loop of a thread over consecutive elements"
            raise TransformRefused(
                self.name, f"{reason} (`for (l = 0; l < N; ++l) a[l + c] = ...;`, N a constant power of two ≤ 16)"
            )
        return Variant(
            name=NAME,
            body=edited_body(src, edits),
            params=(
                TunableParam(
                    PACKS,
                    (0, 1),
                    0,
                    Binding.TEMPLATE,
                    description="a thread's short loops read and written as whole packs (1) or as written (0)",
                    try_first=1,  # kept at 9 of the 12 sizes the corpus searches ran it (runs 32-96)
                ),
            ),
            helpers=HELPERS,
            provenance=Provenance(self.name, note=f"{packed} loop(s) read and written as whole packs"),
        )

    def _packed(
        self,
        src: KernelSource,
        loop: Node,
        names: dict[str, int],
        pointers: Pointers,
        prefix: str,
    ) -> str | None:
        """The packed form of `loop`; None when it is not a short loop over consecutive elements; _Refused when it
        is one whose reads and writes cannot move."""
        shape = _shape(src, loop, names)
        if shape is None:
            return None
        var, start, count, body = shape
        statements = (
            [c for c in body.named_children if c.type != "comment"] if body.type == "compound_statement" else [body]
        )
        stores: list[_Stream] = []
        for s in statements:
            assignment = s.named_children[0] if s.type == "expression_statement" and s.named_children else None
            if (
                assignment is None
                or assignment.type != "assignment_expression"
                or src.field(assignment, "operator") != "="
            ):
                return None  # not only element stores: not this shape
            target = assignment.child_by_field_name("left")
            stream = _stream(src, target, var, names) if target is not None else None
            if stream is None or stream.array not in pointers.names:
                return None
            stores.append(stream)
        written = written_names(src, body)
        if var in written:
            raise _Refused(f"changes {var} in its body")
        reads = [n for n in descendants(body, "identifier") if src.text(n) in {st.array for st in stores}]
        if len(reads) != len(stores):
            raise _Refused(f"reads {src.text(reads[0])}, which it writes")
        for a, b in ((a, b) for k, a in enumerate(stores) for b in stores[k + 1 :]):
            if a.array == b.array and abs(a.offset - b.offset) < count:
                raise _Refused(f"writes {a.array} at elements {count} or fewer apart: the packs would overlap")
        targets: set[str] = set()
        for stream in stores:
            based = pointers.bases(src, stream.array)
            if not based or not based <= pointers.restrict:
                raise _Refused(
                    f"writes through {stream.array}, which no `__restrict__` parameter reaches: a read of the loop may "
                    "see what it writes"
                )
            targets |= based
        for ident in descendants(body, "identifier"):
            name = src.text(ident)
            if name in pointers.names and name not in {st.array for st in stores}:
                based = pointers.bases(src, name)
                if based is None or based & targets:
                    raise _Refused(
                        f"reads through {name}, which may reach the memory it writes "
                        f"({', '.join(sorted(based or targets))})"
                    )
        for call in descendants(body, "call_expression"):
            function = "".join(src.field(call, "function").split()).split("<")[0]
            if function not in CASTS:
                raise _Refused(f"calls {function} (line {src.line(call)}), which may read or write memory")
        if set(re.findall(r"[A-Za-z_]\w*", start)) & written:
            raise _Refused("changes its start in its body")
        if re.search(r"\w\s*\(|\[|->", start):
            raise _Refused(f"starts at `{start}`, which calls or reads memory: the packs would compute it again")
        loads = _loads(src, body, var, names, pointers.names, {st.array for st in stores}, written)
        return _rewritten(src, loop, var, start, count, stores, loads, prefix)


class _Refused(Exception):
    """The loop has the shape, but packing it could change what it does (the message says why)."""


def _shape(src: KernelSource, loop: Node, names: dict[str, int]) -> tuple[str, str, int, Node] | None:
    """(index, start, count, body) of `for (T l = S; l < S + N; ++l)` with N a constant in _COUNTS, else None."""
    init, cond, update = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    body = loop.child_by_field_name("body")
    if init is None or cond is None or update is None or body is None:
        return None
    head = re.fullmatch(rf"\s*(?:const\s+)?{_INDEX_TYPES}\s+(\w+)\s*=(.+?);?\s*", src.text(init), re.S)
    if head is None:
        return None
    var, start = head.group(1), "".join(head.group(2).split())
    if "".join(src.text(update).split()) not in (f"{var}++", f"++{var}", f"{var}+=1"):
        return None
    bound = re.fullmatch(rf"{var}<(.+)", "".join(src.text(cond).split()))
    if bound is None:
        return None
    limit = bound.group(1)
    if start == "0":
        count = int_value(limit, names)
    elif limit.startswith(f"{start}+") or limit.startswith(f"({start})+"):
        count = int_value(limit.split("+", 1)[1] if limit.startswith(start) else limit[len(start) + 3 :], names)
    else:
        return None
    if count not in _COUNTS:
        return None
    return var, start, count, body


def _stream(src: KernelSource, node: Node, var: str, names: dict[str, int]) -> _Stream | None:
    """`node` as `A[l + c]` (A an identifier, c a constant), else None."""
    if node.type != "subscript_expression":
        return None
    array = node.child_by_field_name("argument")
    index = node.child_by_field_name("indices") or node.child_by_field_name("index")
    if array is None or index is None or array.type != "identifier":
        return None
    text = squeezed(src.text(index).strip("[]"))
    if text == var:
        return _Stream(src.text(array), 0, (node,))
    m = re.fullmatch(rf"{var}\+(.+)|(.+)\+{var}", text)
    offset = int_value(next(g for g in m.groups() if g is not None), names) if m is not None else None
    return _Stream(src.text(array), offset, (node,)) if offset is not None else None


def _loads(
    src: KernelSource,
    body: Node,
    var: str,
    names: dict[str, int],
    pointers: frozenset[str],
    stored: set[str],
    written: set[str],
) -> list[_Stream]:
    """The arrays the loop reads only at `Q[l + c]`, one stream per (Q, c): packed loads before the loop. An array
    read under a condition (`l < n ? q[l] : 0`, `ok && q[l]`) stays read element by element: the pack would read
    elements the loop may not, past an end it guards."""
    found: dict[tuple[str, int], list[Node]] = {}
    other: set[str] = set()
    for node in descendants(body, "subscript_expression"):
        parent = node.parent
        if parent is not None and parent.type == "assignment_expression" and parent.child_by_field_name("left") == node:
            continue  # a store
        stream = _stream(src, node, var, names)
        if (
            stream is None
            or stream.array not in pointers
            or stream.array in stored | written
            or _conditional(src, node, body)
        ):
            array = node.child_by_field_name("argument")
            other.add(src.text(array) if array is not None else "")
            continue
        found.setdefault((stream.array, stream.offset), []).append(node)
    return [_Stream(a, c, tuple(nodes)) for (a, c), nodes in found.items() if a not in other]


def _conditional(src: KernelSource, node: Node, top: Node) -> bool:
    """Whether `node` is evaluated only on a condition: an arm of `?:`, or the right side of `&&` or `||`."""
    child, parent = node, node.parent
    while parent is not None and child != top:
        if parent.type == "conditional_expression" and child != parent.child_by_field_name("condition"):
            return True
        if (
            parent.type == "binary_expression"
            and src.field(parent, "operator") in ("&&", "||")
            and child == parent.child_by_field_name("right")
        ):
            return True
        child, parent = parent, parent.parent
    return False


def _rewritten(
    src: KernelSource,
    loop: Node,
    var: str,
    start: str,
    count: int,
    stores: list[_Stream],
    loads: list[_Stream],
    prefix: str,
) -> str:
    """The packed loop: each load stream read as one pack, the loop writing registers, each store stream one pack."""
    base = "" if start == "0" else f"({start}) + "
    local = var if start == "0" else f"{var} - ({start})"
    lines = [f"decltype(cutune_tp_elem({s.array})) {prefix}s{k}[{count}];" for k, s in enumerate(stores)]
    lines += [f"decltype(cutune_tp_elem({s.array})) {prefix}l{k}[{count}];" for k, s in enumerate(loads)]
    lines += [f"cutune_tp_load<{count}>({prefix}l{k}, {s.array} + {base}({s.offset}));" for k, s in enumerate(loads)]
    body = loop.child_by_field_name("body")
    assert body is not None
    edits = [(n, f"{prefix}l{k}[{local}]") for k, s in enumerate(loads) for n in s.accesses]
    edits += [(s.accesses[0], f"{prefix}s{k}[{local}]") for k, s in enumerate(stores)]
    pieces, pos = [], loop.start_byte
    for node, new in sorted(edits, key=lambda e: e[0].start_byte):
        pieces += [src.data[pos : node.start_byte].decode(), new]
        pos = node.end_byte
    pieces.append(src.data[pos : loop.end_byte].decode())
    indent = line_indent(src.data, loop.start_byte)
    text = "".join(pieces).replace("\n" + indent, "\n")
    lines += ["#pragma unroll", text]
    lines += [f"cutune_tp_store<{count}>({s.array} + {base}({s.offset}), {prefix}s{k});" for k, s in enumerate(stores)]
    return "\n".join(lines)


def _local_constants(src: KernelSource, names: dict[str, int]) -> dict[str, int]:
    """The kernel's locals set once, where declared, to an integer constant (`const int n = 4;`)."""
    values = {name: int_value(text, names) for name, text in local_values(src).items()}
    return {name: v for name, v in values.items() if v is not None}


def _indented(text: str, indent: str) -> str:
    """Every line of `text` at `indent` (pragmas too: the compiler reads them wherever they sit)."""
    return "\n".join(indent + ln if ln.strip() else ln for ln in text.split("\n"))
