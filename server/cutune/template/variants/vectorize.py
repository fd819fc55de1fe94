"""vectorize: stride loops over contiguous elements read and write VEC_BYTES-wide packs.

A subscript `a[base + i]` of a stride loop over `i` (base invariant in the loop, `a` a pointer the loop
does not change) is contiguous: thread-wise pack `p` covers `i` in [p·V, p·V + V). The loop becomes a
loop over packs (PACKS of them per iteration, all loaded before any is computed), in which the original
body runs once per element with each contiguous subscript replaced by its pack's element; a scalar loop
finishes the tail. Whether every pack start is aligned is checked at run time: when one is not, the
scalar loop does all the work, so any pointer offset stays correct. Other uses of `i` keep working (it is
still defined per element); an array written through a pack must have no other access in the loop.

When no thread or block index is used outside the loops it rewrites, the loops cover their range with
any block size, so the variant may also launch fewer threads (BLOCK_DIV): with V elements per pack,
V times fewer threads have the same work to do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.errors import TransformRefused
from cutune.template.edits import EditList, apply_edits
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.spec import KernelSpec
from cutune.template.variants.loops import (
    BLOCK_DIVIDED,
    StrideLoop,
    block_free,
    declared_names,
    indented,
    kernel_source,
    line_indent,
    loop_blockers,
    squeezed,
    stride_loops,
    written_names,
)
from cutune.template.variants.model import Launch, Provenance, Transform, Variant

NAME = "vectorized"
_PREFIX = "cutune_vec"
HELPERS = f"""\
// cutune: a pack of N elements, loaded and stored as one aligned access (used by variant {NAME})
template <int N, typename E>
struct alignas(sizeof(E) * N) {_PREFIX}_t {{
  E v[N];
}};
template <int N, typename E>
__device__ __forceinline__ {_PREFIX}_t<N, E> {_PREFIX}_load(const E* p) {{
  return *reinterpret_cast<const {_PREFIX}_t<N, E>*>(p);
}}
template <int N, typename E>
__device__ __forceinline__ void {_PREFIX}_store(E* p, const {_PREFIX}_t<N, E>& pack) {{
  *reinterpret_cast<{_PREFIX}_t<N, E>*>(p) = pack;
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


class Vectorize(Transform):
    name = "vectorize"

    def apply(self, model: SourceModel, kernel: str, spec: KernelSpec | None) -> Variant:
        src = kernel_source(self.name, model, kernel)
        loops, reasons = stride_loops(src)
        if not loops:
            why = "; ".join(reasons) if reasons else "the kernel has no for loop"
            raise TransformRefused(self.name, f"no block- or grid-stride loop ({why})")
        edits = EditList(src.data)
        done: list[StrideLoop] = []
        refusals: list[str] = []
        for loop in loops:
            blocker = loop_blockers(src, loop)
            packs = self._packs(src, loop) if blocker is None else blocker
            if isinstance(packs, str):
                refusals.append(f"the loop at line {src.line(loop.node)} {packs}")
                continue
            new = indented(self._rewrite(src, loop, packs, len(done)), line_indent(src.data, loop.node.start_byte))
            edits.replace(loop.node.start_byte, loop.node.end_byte, new.lstrip())
            done.append(loop)
        if not done:
            raise TransformRefused(self.name, "; ".join(refusals))
        body = apply_edits(src.model.text, edits.edits).encode("utf-8")
        shift = len(body) - len(src.data)
        inner = body[src.kernel.body_span.start_byte + 1 : src.kernel.body_span.end_byte - 1 + shift].decode()
        params = [
            TunableParam(
                "VEC_BYTES", (8, 16), 16, Binding.TEMPLATE, description="bytes per vector load/store (vectorized)"
            ),
            TunableParam("PACKS", (1, 2, 4), 1, Binding.TEMPLATE, description="packs per thread per iteration"),
        ]
        launch = None
        if block_free(src, done):
            params.append(
                TunableParam(
                    "BLOCK_DIV",
                    (1, 2, 4, 8),
                    1,
                    Binding.LAUNCH,
                    description="threads per block divided by (vectorized)",
                )
            )
            launch = Launch(grid=("{grid}",), block=(BLOCK_DIVIDED,))
        lines = ", ".join(str(src.line(lp.node)) for lp in done)
        return Variant(
            name=NAME,
            body=inner,
            params=tuple(params),
            launch=launch,
            helpers=HELPERS,
            provenance=Provenance(self.name, note=f"packed loads and stores in the loop(s) at line {lines}"),
        )

    def _packs(self, src: KernelSource, loop: StrideLoop) -> list[_Pack] | str:
        """The loop's contiguous access streams, or why it has none it can pack safely."""
        declared = declared_names(src, loop.body)
        written = written_names(src, loop.body)
        unconditional = {
            (s.start_byte, s.end_byte)
            for s in (loop.body.named_children if loop.body.type == "compound_statement" else [loop.body])
            if s.type == "expression_statement"
        }
        has_continue = bool(descendants(loop.body, "continue_statement"))
        packs: dict[tuple[str, str], _Pack] = {}
        scalar: dict[str, Node] = {}
        for sub in descendants(loop.body, "subscript_expression"):
            array_node, indices = sub.child_by_field_name("argument"), sub.child_by_field_name("indices")
            if array_node is None or indices is None or len(indices.named_children) != 1:
                continue
            if loop.var not in _identifiers(src, indices):
                continue
            array = src.text(array_node)
            base = _base(src, indices.named_children[0], loop.var)
            if (
                array_node.type != "identifier"
                or base is None
                or array in declared
                or array in written
                or (set(_words(base)) & (declared | written))
            ):
                scalar.setdefault(array, sub)
                continue
            key = (array, squeezed(base))
            pack = packs.setdefault(key, _Pack(array, base, f"{_PREFIX}_{len(packs)}", []))
            node, role = _use(src, sub)
            if role == "address":
                return f"takes the address of {src.text(sub)} (line {src.line(sub)}) other than to load it"
            pack.nodes.append(node)
            if role in ("read", "update"):
                pack.read = True
            if role in ("write", "update"):
                pack.written = True
                statement = _statement(node)
                if has_continue or statement is None or (statement.start_byte, statement.end_byte) not in unconditional:
                    pack.conditional_write = True
        if not packs:
            return f"has no contiguous subscript `a[base + {loop.var}]`"
        for (array, _), pack in packs.items():
            if not pack.written:
                continue
            others = [p for (a, _), p in packs.items() if a == array and p is not pack]
            if others or array in scalar:
                return f"writes {array} as a pack and also accesses it otherwise: packs could overlap"
        return list(packs.values())

    def _rewrite(self, src: KernelSource, loop: StrideLoop, packs: list[_Pack], index: int) -> str:
        """The vectorized loop, its alignment check and its scalar tail, as one block statement."""
        var, vt = loop.var, loop.var_type or "long long"
        n, vec, done = f"{_PREFIX}_n{index}", f"{_PREFIX}_w{index}", f"{_PREFIX}_done{index}"
        count, p0, p, u, j = (f"{_PREFIX}_{x}{index}" for x in ("packs", "p0", "p", "u", "j"))
        first = packs[0]
        elem = f"{first.array}[0]"
        body = _replaced(src, loop.body, packs, u, j)
        aligned = f"{_PREFIX}_aligned{index}"
        checks = [
            f"reinterpret_cast<unsigned long long>(&{k.array}[{k.base}]) % (sizeof({k.array}[0]) * {vec}) == 0"
            for k in packs
        ]
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
                *(
                    f"          {k.name}[{u}] = {_PREFIX}_load<{vec}>(&{k.array}[({k.base}) + {p} * {vec}]);"
                    for k in loads
                ),
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
                f"          {_PREFIX}_store<{vec}>(&{k.array}[({k.base}) + {p} * {vec}], {k.name}[{u}]);"
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


def _use(src: KernelSource, sub: Node) -> tuple[Node, str]:
    """The node to replace for a subscript and how it is used: read, write, update (both) or address."""
    parent = sub.parent
    if parent is not None and parent.type == "pointer_expression" and src.text(parent).startswith("&"):
        call = parent.parent.parent if parent.parent is not None else None
        if (
            call is not None
            and call.type == "call_expression"
            and src.field(call, "function") in ("__ldg", "__ldcs", "__ldcg", "__ldca", "__ldlu", "__ldcv")
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


def _statement(node: Node) -> Node | None:
    """The expression statement holding `node`, if any."""
    current: Node | None = node
    while current is not None and current.type != "expression_statement":
        current = current.parent
    return current


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
