"""row_reduce: a one-block-per-row reduction kernel (RMSNorm, fused add + RMSNorm, LayerNorm, softmax) rewritten
into rows per block, threads per row, vector loads, an all-reduce by warp shuffles and shared memory, and one
pass over a row kept in registers when its length is a compile-time constant that fits.

The kernel shape is read from the syntax tree, not from names: block-stride loops
`for (i = threadIdx.x; i < n; i += blockDim.x)` over a row (each element at `a[i]` or `a[base + i]`), between
them block-wide reductions (cub::BlockReduce, warp shuffles or a shared-memory tree) of accumulators the loops
update (`acc += e`, `acc = fmaxf(acc, e)`), and the values computed from the reduced totals (the
`s_variance = rsqrtf(...)` of thread 0, broadcast through shared memory). The rewrite keeps every loop body
as written, runs it over ROW_VEC elements of each thread's packs, and replaces each reduction by an
all-reduce after which every thread computes the values itself, so no broadcast is needed.

Around that shape it also reads: a block-uniform `if (row >= rows) return;` before the first row loop, or
`if (row < rows) { ... }` around the rest (the block
stays, its row undone, since every thread must reach the all-reduces); rows placed by blockIdx.y/z and gridDim
(one row per block then: sharing a block would change gridDim.x); pointer parameters moved to the row before the
loops (`x += row * stride;`); and row loops over a 2-D block's threads in order
(`threadIdx.y * blockDim.x + threadIdx.x`, stepping by `blockDim.x * blockDim.y`), which the new 1-D block replaces;
pair accumulators (`float2 mean_var`, summed part by part) split into their scalar parts first (compound.py);
rows on the block's y axis (`blockIdx.x * blockDim.y + threadIdx.y`, each maybe with its own slice of a shared array)
read as one row per block, and a warp per row of a 1-D block read as rows on y first (rows_on_y.py), rows on y
numbered by a count of their own (`blockIdx.x * F + threadIdx.y`) with the block's y axis moved onto the grid
(rows_on_grid.py), either only where no warp exchanges values across rows (the block's x a multiple of 32); a row
kept in local arrays by counted loops over the block's rounds, read as stride loops with each array the variant's
register cache (register_rows.py); a body wholly under `#if`/`#ifdef`, kept under it; warp shuffles through
cooperative-groups tiles (`g.shfl_down(v, o)`) or wrappers; an array read only under a condition, read there element
by element; and totals finished in place after their reduction (`variance /= n;`). A reduction by warp shuffles
alone is the row's only where a row's threads are one warp (the spec's block, or every launch in the file, at most
32 wide). Counted loops over packs (pack_rounds) leave the row's accesses in a pack type's `load`/`store` calls or
`*reinterpret_cast<P*>(addr)`: kept as written, each pack where it was; the launch-dependency controls
(`griddepcontrol`, or the runtime's `cudaGridDependencySynchronize()` / `cudaTriggerProgrammaticLaunchCompletion()`)
stay before and after the new body; a store through a local of the element (`out[id * W + j] = v`, a pack written
value by value, or an index the body sets from the element on every branch: `if (col32) at = f(i); else at = i;`)
into an array the kernel only ever stores to is the element's own, kept as written; a row staged in dynamic shared
memory at the element (`S + i` or `&S[i]`, S the array, a pointer into it, or a cast of it) is kept there, from the
array's start, and one indexed there element by element (`S[i]`, `vals[col]` through a prologue pointer into S) is
kept where it was: each thread stores its packs and reads back only those, so the staging is right under any threads
a row, one row a block; `acc = fmaf(x, y, acc)` is a sum; a `__device__` helper whose body is a whole-warp xor
butterfly summing or taking an extremum (`acc = warp_reduce_sum(acc);`, in the file or the headers beside it) is the
warp's reduction; a launch's block set member by member (`dim3 block; block.x = N;`) is read as written; and a row
whose length has a compile-time cap (`min(n, ROUNDS * THREADS)`, a register row's) is kept in registers in one pass
under that cap, every pack in flight before any is used. Where the spec cannot tell a row's length, the search first
tries as many threads a row as cover the host's smallest block's elements ROW_VEC a thread, when that is fewer
than the default.

Short rows may have fewer threads than a warp (8 or 16, where the longest known row has as many packs, or, its length
unknown, where the host launches blocks of at most SHORT_BLOCK threads; a length is known where the spec's sizes,
arguments and integer template arguments give it): a warp then holds several rows, each reduced
over its own aligned lanes (the shuffles name only those), and a warp's memory instructions serve several rows.
The rows of a persistent loop (a worker a row, over a grid of workers) share a block too where they are short,
ROWS_PER_BLOCK a group, every row of the block looping alike so that its barriers are reached alike, over the host's
workers times ROW_WORKERS (a launch parameter: the host sized its persistent grid for its own threads a row, and
fewer threads a row leave fewer rows in flight; the search first tries as many workers as keep the host's threads
in flight). Where the rows' lengths are known, the search first tries as many threads a row as cover the longest
ROW_VEC a thread, when that is fewer than the default. A row length
that is arithmetic over specialised sizes and constants (packs of a specialised width, `(d + VEC - 1) / VEC`) is
known at compile time where those sizes are, as a specialised size itself is.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NoReturn

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.cuda.syntax import node_text
from cutune.errors import CutuneError, TransformRefused
from cutune.spec import KernelSpec
from cutune.template.dtypes import dtype_size
from cutune.template.edits import EditList, apply_edits
from cutune.template.expr import compile_expr
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.recipes.host import launched_block_x
from cutune.template.recipes.specialize import static_param
from cutune.template.variants.butterfly import OWN, PARTNER, REDUCE_CALL, Butterfly, helper_butterfly, int_value
from cutune.template.variants.canonical.template_args import literal_value
from cutune.template.variants.compound import split_compound_accumulators
from cutune.template.variants.constexpr_arms import Arms, constexpr_arms, joined, one_arm, template_arms
from cutune.template.variants.loops import (
    ARITHMETIC,
    EXTREMUM_CALLS,
    constant_names,
    declared_identifier,
    declared_names,
    index_form,
    local_values,
    root_variable,
    sets_first,
    update_op,
    written_names,
)
from cutune.template.variants.model import Launch, Provenance, Transform, Variant
from cutune.template.variants.register_rows import ROW_THREADS, register_rows
from cutune.template.variants.rows_on_grid import GRID as ON_GRID
from cutune.template.variants.rows_on_grid import launched_value, moved_spec, rows_on_grid, warps_within_rows
from cutune.template.variants.rows_on_y import GRID_X, WARP_GRID_X, rows_on_y, warps_on_y

THREADS = ROW_THREADS
ROWS = "ROWS_PER_BLOCK"
_ARM_DEPTH = 2  # template branches read arm by arm, one within another, at most
_LINE = re.compile(r"\(line (\d+)\)")  # the line a refusal names first
ALLREDUCE = "cutune_rr_allreduce"  # the helper (in HELPERS) each reduction becomes a call of
VEC = "ROW_VEC"
# a persistent row loop's workers, the host's count times this: the host sized its grid for the original's threads a
# row, and fewer threads a row (or several rows a block) leave fewer rows in flight per SM at that count
WORKERS = "ROW_WORKERS"
MAX_CACHED = 64  # elements of one array a thread keeps in registers in the one-pass form
# packs a thread keeps in registers where the row's length is known only at run time and fits them (0: none): the
# one-pass form without a length compiled in (a length in a struct the specialize recipe cannot reach, or one binary
# for every length up to the cap)
CAP = "ROW_CAP"
# a block of fewer threads than a warp idles the rest of it: rows of fewer threads only where several share a block
ROW_FILLS_WARP = f"{THREADS} >= warp_size"
ROWS_FILL_WARPS = f"{THREADS} * {ROWS} >= warp_size"
SHORT_BLOCK = 128  # a host block of at most this many threads for its shortest row: rows short enough to share a warp
# a row this long fills 128 threads with 16-byte accesses: sharing a block with other rows gains it nothing
SHORT_ROW_BYTES = 128 * 16
_SPACE = re.compile(r"\s+")
_OPS = {"sum": "cutune_rr_sum", "max": "cutune_rr_max", "min": "cutune_rr_min"}
_MIN_CALLS = {"min", "::min", "std::min", "cuda::std::min"}
# a butterfly step's combine (butterfly.py's OWN and PARTNER) → the reduction it is
_BUTTERFLY_OPS = {
    f"{OWN}+({PARTNER})": "sum",
    f"{OWN}+{PARTNER}": "sum",
    f"{PARTNER}+{OWN}": "sum",
    **{f"{fn}({a},{b})": op for fn, op in EXTREMUM_CALLS.items() for a, b in ((OWN, PARTNER), (PARTNER, OWN))},
}
# the count a loop over a 2-D block's threads in order (`threadIdx.y * blockDim.x + threadIdx.x`) steps by
_FLAT_STEPS = ("blockDim.x*blockDim.y", "blockDim.y*blockDim.x")
_SHUFFLE = re.compile(r"(__)?shfl(_xor|_down|_up)?(_sync)?")
_WARP_NAMES = {"WARP_SIZE", "warpSize", "WARPSIZE", "kWarpSize"}  # the warp size by its usual names
_INTEGRAL = {"int", "unsigned", "unsigned int", "int32_t", "uint32_t", "int64_t", "uint64_t", "long", "size_t"}

HELPERS = """\
#ifndef CUTUNE_ROW_REDUCE_HELPERS
#define CUTUNE_ROW_REDUCE_HELPERS
// cutune row_reduce: CutuneV consecutive elements loaded and stored as one aligned access
template <typename CutuneE, int CutuneV>
struct alignas(sizeof(CutuneE) * CutuneV) cutune_rr_pack {
  CutuneE v[CutuneV];
};
template <typename CutuneP>
struct cutune_rr_elem;
template <typename CutuneE>
struct cutune_rr_elem<CutuneE*> {
  using type = CutuneE;
};
template <typename CutuneE>
struct cutune_rr_elem<const CutuneE*> {
  using type = CutuneE;
};
// whether every access to the `len` elements at p can be one whole, aligned pack of CutuneV
template <int CutuneV, typename CutuneE>
__device__ __forceinline__ bool cutune_rr_whole(const CutuneE* p, int len) {
  return len % CutuneV == 0 && reinterpret_cast<unsigned long long>(p) % (sizeof(CutuneE) * CutuneV) == 0;
}
// elements [base, base + CutuneV) of a row cutune_rr_whole accepts, when the pack lies in the row (`in_row`): one
// vector access under a predicate, so the loads of several packs issue back to back
template <typename CutuneE, int CutuneV>
__device__ __forceinline__ void cutune_rr_load_whole(cutune_rr_pack<CutuneE, CutuneV>& dst, const CutuneE* src,
                                                     int base, bool in_row) {
  if (in_row) dst = *reinterpret_cast<const cutune_rr_pack<CutuneE, CutuneV>*>(src + base);
}
// elements [base, base + CutuneV) of any row of `len`: one vector access when whole and aligned, else one by one
template <typename CutuneE, int CutuneV>
__device__ __forceinline__ void cutune_rr_load(cutune_rr_pack<CutuneE, CutuneV>& dst, const CutuneE* src, int base,
                                               int len, bool ok) {
  if (!ok) return;
  if (base + CutuneV <= len && reinterpret_cast<unsigned long long>(src + base) % sizeof(dst) == 0) {
    dst = *reinterpret_cast<const cutune_rr_pack<CutuneE, CutuneV>*>(src + base);
  } else {
#pragma unroll
    for (int i = 0; i < CutuneV; ++i)
      if (base + i < len) dst.v[i] = src[base + i];
  }
}
// elements [base, base + CutuneV) stored: as cutune_rr_load_whole when the row is `whole`, else as cutune_rr_load
template <typename CutuneE, int CutuneV>
__device__ __forceinline__ void cutune_rr_store(CutuneE* dst, const cutune_rr_pack<CutuneE, CutuneV>& src, int base,
                                                int len, bool ok, bool whole, bool in_row) {
  if (whole) {
    if (in_row) *reinterpret_cast<cutune_rr_pack<CutuneE, CutuneV>*>(dst + base) = src;
    return;
  }
  if (!ok) return;
  if (base + CutuneV <= len && reinterpret_cast<unsigned long long>(dst + base) % sizeof(src) == 0) {
    *reinterpret_cast<cutune_rr_pack<CutuneE, CutuneV>*>(dst + base) = src;
  } else {
#pragma unroll
    for (int i = 0; i < CutuneV; ++i)
      if (base + i < len) dst[base + i] = src.v[i];
  }
}
struct cutune_rr_sum {
  template <typename CutuneT>
  __device__ __forceinline__ CutuneT operator()(CutuneT a, CutuneT b) const { return a + b; }
};
struct cutune_rr_max {
  template <typename CutuneT>
  __device__ __forceinline__ CutuneT operator()(CutuneT a, CutuneT b) const { return a > b ? a : b; }
};
struct cutune_rr_min {
  template <typename CutuneT>
  __device__ __forceinline__ CutuneT operator()(CutuneT a, CutuneT b) const { return a < b ? a : b; }
};
// every thread of a row (threadIdx.x < CutuneThreads) gets op over the row's values: butterfly shuffles within a
// warp, then the warps' results through the row's own slots `s` (one a warp); every thread of the block calls it
// alike, so its one barrier is (block_items counts its calls as barriers). A row of fewer than 32 threads is its
// aligned lanes of a warp that holds several rows (the block's x extent is the row's): its shuffles name only
// those lanes, so a block of one short row (a partial warp) is well defined too
template <int CutuneThreads, typename CutuneT, typename CutuneOp>
__device__ __forceinline__ CutuneT cutune_rr_allreduce(CutuneT v, CutuneOp op, CutuneT* s) {
  constexpr int CutuneW = CutuneThreads < 32 ? CutuneThreads : 32;
  unsigned cutune_mask = 0xffffffffu;
  if constexpr (CutuneW < 32) {
    const unsigned cutune_lane = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32;
    cutune_mask = ((1u << CutuneW) - 1) << (cutune_lane / CutuneW * CutuneW);
  }
#pragma unroll
  for (int o = CutuneW / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(cutune_mask, v, o, CutuneW));
  if constexpr (CutuneThreads > 32) {
    if (threadIdx.x % 32 == 0) s[threadIdx.x / 32] = v;
    __syncthreads();
    v = s[0];
#pragma unroll
    for (int w = 1; w < CutuneThreads / 32; ++w) v = op(v, s[w]);
  }
  return v;
}
#endif  // CUTUNE_ROW_REDUCE_HELPERS
"""


@dataclass
class _Stream:
    """One row array as the loops address it: `array[base + i]` (base "" for `array[i]`)."""

    index: int
    array: Node
    base: Node | None
    cached: bool = False  # kept in registers from one loop to the next (one-pass form)
    register: tuple[str, str] | None = None  # a local array of the row's values, never memory: (type, size)

    @property
    def name(self) -> str:
        return f"cutune_s{self.index}"


@dataclass
class _Loop:
    """A block-stride loop over the row and what its body touches."""

    node: Node
    var: str
    var_type: str
    bound: Node
    body: Node
    accesses: list[tuple[Node, _Stream]] = field(default_factory=list)
    reads: set[int] = field(default_factory=set)  # stream indices read
    writes: set[int] = field(default_factory=set)
    blind_writes: set[int] = field(default_factory=set)  # written only conditionally: load first
    guarded_reads: dict[int, Node] = field(default_factory=dict)  # stream → a read of it made only on a condition
    plain_reads: set[int] = field(default_factory=set)  # streams read whatever the conditions
    updates: dict[str, str] = field(default_factory=dict)  # accumulator → op
    # the row's packs a pack type's methods load or store (`v.load(x + off + i * W)`): kept in the body as written
    packs: list[tuple[Node, bool]] = field(default_factory=list)  # (the address, whether stored)
    stages: list[tuple[str, bool]] = field(default_factory=list)  # (the thread's own staging in shared memory, stored)
    flat: bool = False  # over a 2-D block's threads in order (`threadIdx.y * blockDim.x + threadIdx.x`)


@dataclass
class _Reduction:
    """The block-wide reduction of one accumulator, in one segment between row loops."""

    acc: str
    op: str
    type: str


@dataclass
class _Value:
    """A value a segment computes from reduced totals, e.g. `s_variance = rsqrtf(variance / n + eps)`."""

    name: str
    rhs: Node
    declare: str  # the type to declare it with; "" to assign an existing variable
    deps: set[str]
    op: str = "="  # a compound update of a total or value (`variance /= n;`) keeps its operator


@dataclass
class _Segment:
    reductions: list[_Reduction]
    values: list[_Value]
    calls: dict[int, str]  # start byte of a reduction call (cub) or shared image read → accumulator
    ends: dict[int, int]  # and its end byte
    # a variable the shared partials are combined into (`total += partial[w]`) → the accumulator it totals
    aliases: dict[str, str] = field(default_factory=dict)
    stats: list[_Stat] = field(default_factory=list)
    # the segment's declarations without a value of names the later code sets and reads (`float out_f;`), as written
    bare: list[str] = field(default_factory=list)
    combines: dict[str, list[int]] = field(default_factory=dict)  # a variable → where partials are combined into it


@dataclass
class _Stat:
    """A per-row value the row's first thread stores between the loops (`if (tid == 0) mean_out[row] = mean;`)."""

    store: Node  # the assignment
    conditions: list[Node]  # the block-uniform conditions beside the first-thread test


class RowReduce(Transform):
    """Row reductions: rows per block, threads per row, vector loads, shuffle all-reduce, one pass in registers."""

    name = "row_reduce"

    def apply(self, model: SourceModel, kernel: str, spec: KernelSpec | None) -> Variant:
        """The row-reduction variant of `kernel`, or TransformRefused saying why it cannot be rewritten."""
        try:
            return self._apply(model, kernel, spec, {})
        except TransformRefused as refused:
            variant = self._at_one_arm(model, kernel, spec, refused.reason, 0)
            if variant is None:
                raise
            return variant

    def _at_one_arm(
        self, model: SourceModel, kernel: str, spec: KernelSpec | None, why: str, depth: int
    ) -> Variant | None:
        """Where the body branches on a boolean template parameter at the line `why` (a refusal) names (`if constexpr
        (UseSmem)` inside the loop it refuses) and the whole cannot be rewritten: the variant of both arms where they
        join, else of the instantiations of one arm (flashinfer's all-reduce RMSNorm reads its row back only where
        UseSmem holds; where it does not, the row's last element stands for it), another such branch read the same way
        within it; None where neither arm can be rewritten, the spec's instantiation takes no arm that can, or there is
        no such branch. Only a branch at the refused line is tried: each arm is a whole reading of the kernel."""
        line = _LINE.search(why)
        try:
            src = KernelSource(model, model.kernel(kernel))
        except CutuneError:  # a definition the reading cannot follow: `_apply`'s refusal says so
            return None
        arms = template_arms(src, int(line.group(1))) if line is not None and depth < _ARM_DEPTH else None
        if not isinstance(arms, Arms):
            return None
        found: dict[bool, Variant] = {}
        for value, arm in zip((True, False), arms.models, strict=True):
            if not _instantiated(src, spec, arms.condition, value):
                continue
            try:
                found[value] = self._apply(arm, kernel, spec, {})
            except TransformRefused as refused:
                inner = self._at_one_arm(arm, kernel, spec, refused.reason, depth + 1)
                if inner is not None:
                    found[value] = inner
        if len(found) == 2 and isinstance(both := joined(arms, found[True], found[False]), Variant):
            return both
        original = src.text(src.body)[1:-1].strip("\n")
        for value, variant in found.items():
            kept = one_arm(arms, value, variant, original)
            if isinstance(kept, Variant):
                return kept
        return None

    def _apply(
        self,
        model: SourceModel,
        kernel: str,
        spec: KernelSpec | None,
        arrays: dict[str, tuple[str, str]],
        warp_rows: bool = False,
    ) -> Variant:
        """`apply` on a reading of the kernel whose `arrays` (name → element type, size) hold the row's values;
        `warp_rows`: a reading of a warp per row, its row's threads one warp whatever the launches in the file say."""
        k = model.kernel(kernel)
        if k.has_errors:
            self.refuse("the kernel has syntax errors tree-sitter could not parse")
        src = KernelSource(model, k)
        split = split_compound_accumulators(src)
        if split is not None:  # a pair accumulator (float2): its parts are two reductions, read as such
            return self._apply(parse_source(split, model.path, rewrite=True), kernel, spec, arrays, warp_rows)
        under = _under_directive(src)
        if under is not None:  # a body wholly under `#ifdef X`: read inside, the variant under the same condition
            text, opening = under
            variant = self._apply(parse_source(text, model.path, rewrite=True), kernel, spec, arrays, warp_rows)
            return dataclasses.replace(variant, body=f"{opening}\n{variant.body}\n#endif")
        arms = constexpr_arms(src)
        if isinstance(arms, str):
            self.refuse(arms)
        if arms is not None:  # `if constexpr` around row loops: each arm read as the kernel its instantiations run
            variants = []
            for value, arm in zip(("true", "false"), arms.models, strict=True):
                try:
                    variants.append(self._apply(arm, kernel, spec, arrays, warp_rows))
                except TransformRefused as e:
                    self.refuse(f"{e.reason}, where `{arms.condition}` (line {arms.line}) is {value}")
            both = joined(arms, *variants)
            if isinstance(both, str):
                self.refuse(both)
            return both
        registers = register_rows(src, self.name) if not arrays else None
        if registers is not None:  # the row kept in local arrays by counted loops: read as stride loops over it
            registered = parse_source(registers.text, model.path, rewrite=True)
            return self._apply(registered, kernel, spec, registers.arrays, warp_rows)
        warps = warps_on_y(src, _block_x(spec)) if spec is None or spec.block[1:] in ((), ("1",)) else None
        if warps is not None:  # a warp per row of a 1-D block: rows on y of a (32, warps) block, then as those
            if spec is not None:
                spec = dataclasses.replace(spec, block=("32", f"({spec.block[0]}) / 32"))
            variant = self._apply(parse_source(warps, model.path, rewrite=True), kernel, spec, arrays, True)
            assert variant.launch is not None  # row_reduce always sets its launch
            launch = variant.launch  # over the rows the kernel bounds, else one block per warp of the original's
            if launch.grid[0] == GRID_X:
                launch = dataclasses.replace(launch, grid=(WARP_GRID_X, "{grid}", "{grid}"))
            note = variant.provenance.note.replace("each row of threads along y", "each warp's row")
            return dataclasses.replace(
                variant, launch=launch, provenance=dataclasses.replace(variant.provenance, note=note)
            )
        on_y = rows_on_y(src)
        if on_y is not None and not warp_rows and not warps_within_rows(src, spec):
            # a block narrower than a warp puts several rows in one warp, whose exchanges (`xor 16`) cross them
            self.refuse(
                "rows on the block's y axis exchange values within warps, and neither the spec nor the launches in "
                "the file show a block whose x size is a multiple of 32: a warp may hold several rows"
            )
        if on_y is not None:  # rows on the block's y axis: one row per block, on grid.x * block.y blocks
            if spec is not None and len(spec.block) > 1:
                spec = dataclasses.replace(
                    spec, grid=(f"({spec.grid[0]}) * ({spec.block[1]})", *spec.grid[1:]), block=spec.block[:1]
                )
            one = parse_source(on_y, model.path, rewrite=True)
            bound = _bounded_rows(KernelSource(one, one.kernel(kernel)), spec)
            if bound is not None and spec is not None:  # the rows past the bound leave: a grid of that many rows
                spec = dataclasses.replace(spec, grid=(bound, *spec.grid[1:]))
            variant = self._apply(one, kernel, spec, arrays, warp_rows)
            assert variant.launch is not None  # row_reduce always sets its launch
            launch = variant.launch
            if bound is None:
                names = {p.name for p in variant.params}
                workers = rows_grid(GRID_X, ROWS in names, WORKERS in names)
                launch = dataclasses.replace(launch, grid=(workers, "{grid}", "{grid}"))
            note = f"{variant.provenance.note}; each row of threads along y a block of its own"
            return dataclasses.replace(
                variant, launch=launch, provenance=dataclasses.replace(variant.provenance, note=note)
            )
        on_grid = rows_on_grid(src, spec, self.name)
        if on_grid is not None:  # rows on y numbered by a count of their own: the block's y axis moved onto the grid
            if spec is not None:
                grid, block = moved_spec(spec)
                spec = dataclasses.replace(spec, grid=grid, block=block)
            variant = self._apply(parse_source(on_grid, model.path, rewrite=True), kernel, spec, arrays, warp_rows)
            assert variant.launch is not None  # row_reduce always sets its launch
            note = f"{variant.provenance.note}; each row of threads along y a block of its own, on the grid's y axis"
            return dataclasses.replace(
                variant,
                launch=dataclasses.replace(variant.launch, grid=ON_GRID),
                provenance=dataclasses.replace(variant.provenance, note=note),
            )
        guarded = _guarded_rest(src)
        if guarded is not None:  # `if (row < rows) { rest }` last: the early return it is, checked as any
            statement, cond, rest = guarded
            edits = EditList(src.data)
            edits.replace(
                statement.start_byte, statement.end_byte, f"if (!({node_text(src.data, cond)})) return;\n{rest}"
            )
            return self._apply(
                parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True),
                kernel,
                spec,
                arrays,
                warp_rows,
            )
        rows = _persistent_rows(src)
        if rows is None:
            return _Rewriter(self, src, spec, arrays, warp_rows).variant()
        # one row per iteration of a persistent loop: the row's body rewritten as one block per row, looped
        loop, var, bound = rows
        body = loop.child_by_field_name("body")
        assert body is not None
        for node in descendants(body, "return_statement"):
            # one row per block would make it leave only its row; in the loop it leaves every later row too
            self.refuse(f"leaves the kernel inside the persistent row loop (line {src.line(node)})")
        inner = node_text(src.data, body)[1:-1] if body.type == "compound_statement" else node_text(src.data, body)
        edits = EditList(src.data)
        head_text = f"const int {var} = blockIdx.x;\n"
        edits.replace(loop.start_byte, loop.end_byte, f"{head_text}{inner}")
        one = parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)
        start = loop.start_byte + len(head_text.encode())
        row = (bound, start, start + len(inner.encode()))
        rewriter = _Rewriter(self, KernelSource(one, one.kernel(kernel)), spec, arrays, warp_rows, row)
        variant = rewriter.variant()
        first = "const unsigned int cutune_row = blockIdx.x;"
        # rows on y: each iteration a group of ROWS rows, every row of the block looping alike (its barriers)
        group_first = f"const unsigned int cutune_row = blockIdx.x * {ROWS} + threadIdx.y;"
        in_groups = group_first in variant.body
        if not in_groups and first not in variant.body:
            self.refuse("a persistent row loop whose rows could not stay one per block")
        # the launch-dependency controls stay outside the loop, where the original has them
        head, tail = ("\n".join(f) for f in rewriter.fences)
        row_body = variant.body.removeprefix(f"{head}\n" if head else "").removesuffix(f"\n{tail}" if tail else "")
        # the bound may read the prologue's locals (a specialised size): they are declared before the loop too
        before = [
            node_text(src.data, d)
            for d in src.body.named_children
            if d.type == "declaration" and "__shared__" not in node_text(src.data, d)
        ]
        looped = "\n".join(
            [
                *([head] if head else []),
                *before,
                f"for (unsigned int cutune_rows_i = blockIdx.x; cutune_rows_i{f' * {ROWS}' if in_groups else ''} < "
                f"({bound}); cutune_rows_i += gridDim.x) {{",
                row_body.replace(group_first, f"const unsigned int cutune_row = cutune_rows_i * {ROWS} + threadIdx.y;")
                if in_groups
                else row_body.replace(first, "const unsigned int cutune_row = cutune_rows_i;"),
                "__syncthreads();  // shared memory is the block's next row's",
                "}",
                *([tail] if tail else []),
            ]
        )
        note = f"{variant.provenance.note}; each row one iteration of the persistent loop over {var}"
        assert variant.launch is not None  # row_reduce always sets its launch
        hosts = spec.grid[0] if spec is not None else "num_rows"
        # first tried where the host's threads stay in flight: its threads a row over the search's first count (only
        # where a spec's launch tells them)
        count = next(p for p in variant.params if p.name == THREADS)
        told = spec is not None and spec.block and spec.sizes
        host = rewriter._launched_threads(smallest=True) // int(count.try_first or count.default) if told else 1
        counts = (1, 2, 4, 8, 16)
        more = TunableParam(
            WORKERS,
            counts,
            1,
            Binding.LAUNCH,
            description="the host's persistent workers times this",
            try_first=host if host in counts[1:] else None,
        )
        grid = (rows_grid(hosts, in_groups, workers=True), *variant.launch.grid[1:])
        return dataclasses.replace(
            variant,
            body=looped,
            params=(*variant.params, more),
            launch=dataclasses.replace(variant.launch, grid=grid),
            provenance=dataclasses.replace(variant.provenance, note=note),
        )

    def refuse(self, reason: str) -> NoReturn:
        """Stop: this kernel cannot be rewritten, for `reason`."""
        raise TransformRefused(self.name, reason)


class _Rewriter:
    """Reads one kernel's row structure and writes the new body."""

    def __init__(
        self,
        transform: RowReduce,
        src: KernelSource,
        spec: KernelSpec | None,
        arrays: dict[str, tuple[str, str]],
        warp_rows: bool = False,
        persistent: tuple[str, int, int] | None = None,
    ) -> None:
        self.t = transform
        self.warp_rows = warp_rows  # a warp per row read as rows on y: a row's threads are one warp
        # a persistent row loop's body as one row of a block: the loop's bound, and the body's bytes in the source
        self.persistent = persistent
        self.src = src
        self.spec = spec
        self.arrays = arrays  # local arrays holding the row's values (register_rows.py): name → (type, size)
        self.params = {p.name: p for p in src.kernel.params}
        self.shared: dict[str, Node] = {}  # __shared__ name → its declaration
        self.decls: dict[str, tuple[Node, str]] = {}  # prologue local → (declaration, type)
        self.streams: dict[tuple[str, str], _Stream] = {}
        self.replace: dict[int, tuple[int, str]] = {}  # start byte → (end byte, new text)
        self.reduced: set[str] = set()
        self.valued: set[str] = set()  # the values computed from the totals so far
        self.lengths: list[int] = []  # the row length at each spec size, when the spec tells
        self.rows_arg = ""  # the argument counting rows, when rows may share a block
        self.exits: list[Node] = []  # block-uniform `if (cond) return;` before the first row loop
        self.loops: list[_Loop] = []  # the row loops
        self.flat = False  # the row loops run over a 2-D block's threads in order
        self.fences: tuple[list[str], list[str]] = ([], [])  # launch-dependency controls before and after the loops
        # a pointer into dynamic shared memory where each thread stages its packs of the row for itself → the array
        self.stages: dict[str, str] = {}
        self.stage_starts: set[str] = set()  # stages declared at the array's start already (a cast of it)
        # a row array the loops index at the element (`S[i]`, `vals[col]`) that lies in dynamic shared memory (the
        # extern array, or a prologue pointer into it) → the extern array: each thread's own staging of the row
        self.staged: dict[str, str] = {}
        # prologue `ptr += offset;` of pointer parameters (or such moves under a block-uniform `if`) → the pointers
        self.rebases: dict[Node, frozenset[str]] = {}
        self.thread_names = {"threadIdx.x"} | self._renames({"threadIdx.x"})  # `int tid = threadIdx.x;`
        ys = {"threadIdx.y"} | self._renames({"threadIdx.y"})
        flat = {f for x in self.thread_names for y in ys for f in _flat_forms(x, y)}
        self.flat_names = flat | self._renames(flat)  # `const int tid = threadIdx.y * blockDim.x + threadIdx.x;`

    # --- reading ---------------------------------------------------------------------------------------------

    def _renames(self, values: set[str]) -> set[str]:
        """The top-level locals declared as one of `values` (compact text)."""
        return {
            self.text(declared_identifier(d))
            for decl in self.src.body.named_children
            if decl.type == "declaration"
            for d in decl.children_by_field_name("declarator")
            if d.type == "init_declarator" and self.compact(d.child_by_field_name("value")) in values
        }

    def text(self, node: Node | None) -> str:
        return node_text(self.src.data, node) if node is not None else ""

    def compact(self, node: Node | None) -> str:
        return _SPACE.sub("", self.text(node)) if node is not None else ""

    def line(self, node: Node) -> int:
        return self.src.line(node)

    def refuse(self, reason: str, node: Node | None = None) -> NoReturn:
        raise TransformRefused(self.t.name, f"{reason} (line {self.line(node)})" if node is not None else reason)

    def variant(self) -> Variant:
        body = self.src.body
        statements = [c for c in body.named_children if c.type != "comment"]
        fences = [s for s in statements if _is_launch_control(self.src, s)]
        statements = [s for s in statements if s not in fences]
        self.exits = [s for s in statements if self._is_exit(s)]
        loops = [(i, loop) for i, s in enumerate(statements) if (loop := self._row_loop(s)) is not None]
        for s in fences if loops else []:
            if loops[0][1].node.start_byte < s.start_byte < loops[-1][1].node.start_byte:
                self.refuse("controls the dependent launch between the row loops", s)
            self.fences[s.start_byte > loops[0][1].node.start_byte].append(self.text(s))
        self.flat = any(loop.flat for _, loop in loops)
        self._check_whole_body(body, flat=self.flat)
        if not loops:
            nearest = self._nearest()
            self.refuse(
                f"no block-stride loop over a row: {nearest}"
                if nearest
                else "no block-stride loop over a row (`for (i = threadIdx.x; i < n; i += blockDim.x)`)"
            )
        for s in self.exits:
            if statements.index(s) > loops[0][0]:
                self.refuse("leaves the kernel after the first row loop; the rewrite needs every thread there", s)
        if len({loop.flat for _, loop in loops}) > 1:
            self.refuse("some row loops run over threadIdx.x and others over the whole 2-D block")
        bounds = {self.compact(loop.bound) for _, loop in loops}
        if len(bounds) > 1:
            self.refuse(f"the row loops run to different lengths ({', '.join(sorted(bounds))})")
        for node in descendants(body, "for_statement"):
            if node.parent != body and self._starts_at_thread(node):
                self.refuse("a loop over the row sits inside another statement", node)
        for s in statements:
            init = s.child_by_field_name("initializer") if s.type == "for_statement" else None
            if init is not None and "threadIdx" in self.compact(init) and self._row_loop(s) is None:
                self.refuse("a loop over the row starts elsewhere than at threadIdx.x (a tail or offset loop)", s)
        self._collect_shared(body)
        prologue = statements[: loops[0][0]]
        self._read_prologue(prologue)
        self.loops = [loop for _, loop in loops]
        for loop in self.loops:
            self._read_loop(loop)
        self._check_loops([loop for _, loop in loops])
        segments: list[_Segment] = []
        pending: dict[str, str] = {}
        for n, (i, loop) in enumerate(loops):
            pending.update(loop.updates)
            end = loops[n + 1][0] if n + 1 < len(loops) else len(statements)
            later = statements[end:]
            segments.append(self._read_segment(statements[i + 1 : end], pending, later, last=n + 1 == len(loops)))
        if not any(seg.reductions for seg in segments):
            self.refuse("no block-wide reduction between the row loops: not a row reduction")
        return self._emit(prologue, [loop for _, loop in loops], segments)

    def _nearest(self) -> str:
        """What the kernel's loop over the thread's elements is instead of a block-stride row loop, to say so."""
        threads = {"threadIdx"}
        groups: dict[str, tuple[Node, Node]] = {}  # `lane = tid % n`, n no constant: the local → (declaration, n)
        for decl in self.src.body.named_children:  # the locals computed from the thread index
            if decl.type == "declaration" and self._idents(decl) & threads:
                declarator = decl.child_by_field_name("declarator")
                value = declarator.child_by_field_name("value") if declarator is not None else None
                if value is not None and value.type == "binary_expression" and self.src.field(value, "operator") == "%":
                    modulus = value.child_by_field_name("right")
                    if declarator is not None and modulus is not None and self._count(self.text(modulus)) is None:
                        groups[self.text(declared_identifier(declarator))] = (decl, modulus)
                threads |= {self.text(i) for i in _declared_all(decl)}
        for loop in descendants(self.src.body, "for_statement", "while_statement"):
            init = loop.child_by_field_name("initializer")
            reads = self._idents(loop.child_by_field_name("body")) | self._idents(init)
            if not reads & threads:
                continue
            for name in sorted(reads & groups.keys()):
                decl, modulus = groups[name]
                return (
                    f"the loop at line {self.line(loop)} walks the row from `{name}` (line {self.line(decl)}), the "
                    f"thread index modulo `{self.compact(modulus)}`: a row's threads are a group of that many, "
                    "several rows to a block, a size not known to be the block's or a warp's"
                )
            shown = _SPACE.sub(" ", self.text(init)).rstrip("; ")
            if loop.type == "while_statement":
                return f"the loop at line {self.line(loop)} over the thread's elements is a while loop"
            if init is not None and re.search(r"=\s*0\s*;?$", shown):
                return (
                    f"the loop at line {self.line(loop)} counts from 0 (`{shown}`) with the thread in its index, "
                    "a block-stride loop only with the bounds check inside (`if (i * STEP + START < BOUND)`)"
                )
            if init is not None and self._idents(init) & threads:
                return f"the loop at line {self.line(loop)} starts at `{shown}`, not at the thread index"
        return ""

    def _check_whole_body(self, body: Node, flat: bool) -> None:
        for call in descendants(body, "call_expression"):
            name = self.compact(call.child_by_field_name("function"))
            if name.startswith("atomic"):
                self.refuse(f"updates memory with {name}: atomics do not survive a change of thread layout", call)
        exits = {r.start_byte for s in self.exits for r in descendants(s, "return_statement")}
        for node in descendants(body, "return_statement", "goto_statement"):
            if node.start_byte not in exits:
                self.refuse("leaves the kernel early; the rewrite needs every thread at each reduction", node)
        for node in descendants(body, "field_expression"):
            text = self.compact(node)
            # threadIdx.y only numbers the row's threads (in a flat index) or its warps (in the reductions, rewritten)
            if text == "threadIdx.z" or (text == "threadIdx.y" and not flat):
                self.refuse(f"uses {text}: the threads of a row are not one row of the block along x", node)

    def _is_exit(self, s: Node) -> bool:
        """Whether `s` is `if (cond) return;` whose condition every thread of the block evaluates alike (it reads
        only blockIdx, gridDim, parameters the kernel never writes and locals computed from those): the whole block
        leaves, so the rewrite keeps the block and leaves its row undone instead. A refusal when it is an early
        return the rewrite cannot prove block-uniform."""
        if s.type != "if_statement":
            return False
        cond, then = s.child_by_field_name("condition"), s.child_by_field_name("consequence")
        if cond is None or then is None or self.compact(then) not in ("return;", "{return;}"):
            return False
        if s.child_by_field_name("alternative") is not None:
            self.refuse("leaves the kernel early on one branch only", s)
        uniform = self._uniform_names(s)
        shown = self.compact(_condition(s))
        reads, idents = self._uniform_parts(cond)
        for node in reads:
            if not self._uniform_read(node, uniform):
                self.refuse(f"leaves the kernel early on `{shown}`, which reads memory or calls", node)
        for node in descendants(cond, "field_expression"):
            if self.compact(node.child_by_field_name("argument")) not in ("blockIdx", "gridDim"):
                self.refuse(f"leaves the kernel early on `{shown}`, not the same for every thread", node)
        fields = {self.text(f.child_by_field_name("field")) for f in descendants(cond, "field_expression")}
        for ident in idents:
            if self.text(ident) not in uniform | fields | {"blockIdx", "gridDim"}:
                self.refuse(
                    f"leaves the kernel early on `{self.text(ident)}`, not known to be the same for every thread", s
                )
        return True

    def _uniform_read(self, node: Node, uniform: set[str]) -> bool:
        """Whether `node` reads one element the same for every thread of the block from memory the kernel cannot
        change: `flags[i]` with `flags` a pointer-to-const parameter the body never writes (nor any other
        parameter through which it could), `i` of block-uniform names alone (blockIdx, gridDim, `uniform`)."""
        if node.type != "subscript_expression":
            return False
        array, indices = node.child_by_field_name("argument"), node.child_by_field_name("indices")
        param = self.params.get(self.compact(array)) if array is not None else None
        if param is None or indices is None or not re.search(r"\bconst\b[^*]*\*", param.type):
            return False
        if _reads(self, indices) or {
            self.text(f.child_by_field_name("argument")) for f in descendants(indices, "field_expression")
        } - {"blockIdx", "gridDim"}:
            return False
        fields = {self.text(f.child_by_field_name("field")) for f in descendants(indices, "field_expression")}
        names = {self.text(i) for i in descendants(indices, "identifier")}
        return not names - uniform - fields - {"blockIdx", "gridDim"}

    def _uniform_names(self, before: Node, launch: bool = False) -> set[str]:
        """Parameters the body never writes, template parameters, and the top-level locals declared before `before`
        from block-uniform values only (blockIdx, gridDim, such names, sizeof and alignof; no memory reads, no calls
        but integer helpers' over such values); `launch`: from values the same for every thread of the launch instead
        (not the block's index, which rows sharing a block differ by; members of such names, a struct parameter's
        `p.cols`; compile-time constants)."""
        body = self.src.body
        written = written_names(self.src, body)
        names = {p for p in self.params if p not in written} | {p.name for p in self.src.kernel.template_params}
        names |= constant_names(self.src) if launch else set()
        for d in body.named_children:
            if d.start_byte >= before.start_byte:
                break
            if d.type != "declaration" or any(self.text(c) == "__shared__" for c in d.children):
                continue
            declared = {self.text(i) for i in _declared_all(d)}
            if self._uniform_over(d, names | declared, launch):
                names |= declared - written
        return names

    def _uniform_over(self, node: Node, names: set[str], launch: bool = False) -> bool:
        """Whether `node` reads no memory and calls nothing but integer helpers, over `names`, the block's index and
        the grid's shape (`launch`: over `names` and their members alone)."""
        reads, idents = self._uniform_parts(node)
        fields = descendants(node, "field_expression")
        builtins = set() if launch else {"blockIdx", "gridDim"}
        objects = names if launch else builtins
        if reads or any(self.compact(f.child_by_field_name("argument")) not in objects for f in fields):
            return False
        members = {self.text(f.child_by_field_name("field")) for f in fields}
        return not {self.text(i) for i in idents} - names - members - builtins

    def _uniform_parts(self, node: Node) -> tuple[list[Node], list[Node]]:
        """The memory reads and calls in `node`, and the names it reads, less what is the same for every thread
        whenever its arguments are: sizeof and alignof, and calls of integer helpers (min, max, ceil_div, round_up;
        their arguments are read, not their names)."""
        helpers = [
            c
            for c in descendants(node, "call_expression")
            if ARITHMETIC.fullmatch(self.compact(c.child_by_field_name("function")))
        ]
        skipped = [
            (n.start_byte, n.end_byte)
            for n in (
                *descendants(node, "sizeof_expression", "alignof_expression"),
                *(c.child_by_field_name("function") for c in helpers),
            )
            if n is not None
        ]
        helper_calls = {(c.start_byte, c.end_byte) for c in helpers}

        def free(n: Node) -> bool:
            return not any(a <= n.start_byte < b for a, b in skipped)

        reads = [n for n in _reads(self, node) if free(n) and (n.start_byte, n.end_byte) not in helper_calls]
        idents = [i for i in descendants(node, "identifier") if free(i)]
        return reads, idents

    def _starts_at_thread(self, loop: Node) -> bool:
        init = loop.child_by_field_name("initializer")
        value = init.child_by_field_name("right") if init is not None else None
        if init is not None and init.type == "declaration":
            decl = init.child_by_field_name("declarator")
            value = decl.child_by_field_name("value") if decl is not None else None
        return value is not None and self.compact(value) in self.thread_names | self.flat_names

    def _row_loop(self, node: Node) -> _Loop | None:
        """The statement as a block-stride row loop; None when it is not one; a refusal when it almost is."""
        if node.type != "for_statement" or not self._starts_at_thread(node):
            return None
        init = node.child_by_field_name("initializer")
        cond = node.child_by_field_name("condition")
        update = node.child_by_field_name("update")
        body = node.child_by_field_name("body")
        var, var_type = "", "int"
        if init is not None and init.type == "declaration":
            decl = init.child_by_field_name("declarator")
            if decl is not None and decl.type == "init_declarator":
                var = self.compact(decl.child_by_field_name("declarator"))
                var_type = self.text(init.child_by_field_name("type") or init)
                value = self.compact(decl.child_by_field_name("value"))
                var = var if value in self.thread_names | self.flat_names else ""
        elif (
            init is not None
            and init.type == "assignment_expression"
            and self.compact(init.child_by_field_name("right")) in self.thread_names | self.flat_names
        ):
            var = self.compact(init.child_by_field_name("left"))
        if not var or cond is None or body is None or cond.type != "binary_expression":
            self.refuse("a loop starts at threadIdx.x but does not step over the row one block at a time", node)
        if (
            self.compact(cond.child_by_field_name("left")) != var
            or self.text(cond.child_by_field_name("operator")) != "<"
        ):
            self.refuse(f"the row loop's condition is not `{var} < length`", node)
        step = self.compact(update)
        start = init.child_by_field_name("right") if init is not None else None
        if init is not None and init.type == "declaration":
            decl = init.child_by_field_name("declarator")
            start = decl.child_by_field_name("value") if decl is not None else None
        flat = self.compact(start) in self.flat_names
        strides = _FLAT_STEPS if flat else ("blockDim.x",)
        if step not in {f"{var}{op}{by}" for by in strides for op in ("+=", f"={var}+")}:
            self.refuse(f"the row loop steps by `{step}`, not by {strides[0]} (the threads it starts from)", node)
        bound = cond.child_by_field_name("right")
        assert bound is not None
        if "threadIdx" in self.compact(bound):
            self.refuse("the row length depends on the thread", node)
        return _Loop(node, var, var_type, bound, body, flat=flat)

    def _collect_shared(self, body: Node) -> None:
        for decl in descendants(body, "declaration"):
            if any(self.text(c) == "__shared__" for c in decl.children if c.type == "type_qualifier"):
                for d in decl.children_by_field_name("declarator"):
                    ident = declared_identifier(d)
                    if ident is not None:
                        self.shared[self.text(ident)] = decl

    def _read_prologue(self, prologue: list[Node]) -> None:
        for s in prologue:
            if s.type == "declaration":
                if s in self.shared.values():
                    continue
                for d in s.children_by_field_name("declarator"):
                    ident = declared_identifier(d)
                    if ident is not None:
                        self.decls[self.text(ident)] = (s, _type_of(self, s))
            elif (
                s.type in ("alias_declaration", "type_definition", "preproc_call", "static_assert_declaration")
                or self._is_sync(s)
                or s in self.exits
            ):
                continue
            elif (names := self._rebased(s)) is not None:
                self.rebases[s] = names
            elif (misread := _misread_declaration(self, s)) is not None:
                self.decls[misread[0]] = (s, misread[1])
            else:
                self.refuse("does work before the first row loop that the rewrite cannot place", s)

    def _rebased(self, s: Node) -> frozenset[str] | None:
        """The pointer parameters `s` moves to its row (`x += row * stride;`, the same for every thread, or such
        moves under a block-uniform `if`, with the declarations they read); else None."""
        if s.type == "if_statement":
            return self._rebased_block(s)
        expr = s.named_children[0] if s.type == "expression_statement" and s.named_children else None
        if expr is None or expr.type != "assignment_expression":
            return None
        left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
        name = self.compact(left)
        param = self.params.get(name)
        # a pointer parameter, or a local pointer declared before (`const __half2* x2 = reinterpret_cast<...>(x)`)
        pointer = (
            "*" in param.type if param is not None else name in self.decls and "*" in self.text(self.decls[name][0])
        )
        if not pointer or right is None or left is None or left.type != "identifier":
            return None
        if self.text(expr.child_by_field_name("operator")) not in ("+=", "-="):
            return None
        if _reads(self, right) or {
            "threadIdx",
            "blockDim",
        } & self._idents(right):
            return None
        return frozenset((name,))

    def _rebased_block(self, s: Node) -> frozenset[str] | None:
        """For `if (C) { DECLS; x += offset; ... }` (no else; C and DECLS read no memory and no thread index, so
        every thread of a row takes the same branch): the pointers it moves; else None. Kept whole in the
        prologue, the block moves them exactly as before."""
        cond, body = _condition(s), s.child_by_field_name("consequence")
        if cond is None or body is None or s.child_by_field_name("alternative") is not None:
            return None
        if _reads(self, cond) or {"threadIdx", "blockDim"} & self._idents(cond):
            return None
        moved: set[str] = set()
        for t in body.named_children if body.type == "compound_statement" else [body]:
            if t.type == "comment":
                continue
            if t.type == "declaration":
                if _reads(self, t) or {"threadIdx", "blockDim"} & self._idents(t):
                    return None
                continue
            names = self._rebased(t)
            if names is None:
                return None
            moved |= names
        return frozenset(moved) or None

    def _conditional(self, node: Node, top: Node) -> bool:
        """Whether `node`, inside `top`, runs only on a condition: a branch of an `if` or `?:` whose other branch
        does not make the same access, or the right side of `&&` / `||` (a condition itself is always evaluated)."""
        child, parent = node, node.parent
        while parent is not None and child != top:
            if parent.type in ("if_statement", "conditional_expression"):
                branches = [
                    b
                    for f in ("consequence", "alternative")
                    if (b := parent.child_by_field_name(f)) is not None and b != child
                ]
                same = any(
                    self.compact(other) == self.compact(node) for b in branches for other in descendants(b, node.type)
                )
                if child != parent.child_by_field_name("condition") and not (len(branches) == 1 and same):
                    return True
            if (
                parent.type == "binary_expression"
                and self.text(parent.child_by_field_name("operator")) in ("&&", "||")
                and child == parent.child_by_field_name("right")
            ):
                return True
            child, parent = parent, parent.parent
        return False

    def _is_sync(self, node: Node) -> bool:
        return node.type == "expression_statement" and self.compact(node) == "__syncthreads();"

    def _read_loop(self, loop: _Loop) -> None:
        local = {self.text(i) for d in descendants(loop.body, "declaration") for i in _declared_all(d)}
        for n in descendants(loop.body, "field_expression"):
            if self.compact(n.child_by_field_name("argument")) in ("threadIdx", "blockDim"):
                self.refuse(f"uses {self.compact(n)} inside the row loop", n)
        for n in descendants(loop.body, "break_statement", "continue_statement"):
            self.refuse("leaves the row loop early (data-dependent control flow across elements)", n)
        for sub in descendants(loop.body, "subscript_expression"):
            if loop.var in self._idents(sub.child_by_field_name("indices")):
                self._access(loop, sub)
        self._pack_accesses(loop)
        element = self._element_names(loop)
        for node in descendants(loop.body, "assignment_expression", "update_expression"):
            target = node.child_by_field_name("left") or node.child_by_field_name("argument")
            base = target
            while base is not None and base.type == "field_expression":  # `a[i].x`: part of an element
                base = base.child_by_field_name("argument")
            if target is None or (
                base is not None and base.type == "subscript_expression" and loop.var in self._idents(base)
            ):
                continue  # an element of the row
            if any(target.start_byte <= a.start_byte < target.end_byte for a, stored in loop.packs if stored):
                continue  # a pack of the row stored
            if (
                node.type == "assignment_expression"
                and self.text(node.child_by_field_name("operator")) == "="
                and base is not None
                and base.type == "subscript_expression"
                and self._idents(base.child_by_field_name("indices")) & element
                and self._only_stored(_root_name(self, base))
            ):
                continue  # a store at the element (`out[id * W + c] = v`, `id` from the element): no running value
            name = _root_name(self, target)
            if name in local or name == loop.var or self._iterations_own(loop, name):
                continue
            if target.type != "identifier":
                self.refuse(
                    f"accumulates into `{self.compact(target)}`, a part of a compound value or one fixed element: "
                    "the rewrite cannot keep the reductions apart",
                    node,
                )
            loop.updates[name] = self._accumulation(node, name)
        for acc in loop.updates:
            for ident in descendants(loop.body, "identifier"):
                if self.text(ident) == acc and not self._in_update(ident, acc):
                    self.refuse(f"reads the running value of `{acc}` inside the row loop", ident)

    def _pack_accesses(self, loop: _Loop) -> None:
        """The addresses in the row a pack type's `load`/`store` methods take (`v.load(x + base + i * W)`, or through
        a local of the body computed from the element): kept in the body as written, each element where it was."""
        element = self._element_names(loop)
        staged = set(self.shared) | {n for n, (d, _) in self.decls.items() if self._idents(d) & set(self.shared)}
        for node in descendants(loop.body, "call_expression", "pointer_expression"):
            found = self._pack_access(node, element)
            if found is None:
                continue
            address, stored = found
            if self._idents(address) & staged:
                stage = self._own_stage(address, element)
                if stage is None:
                    self.refuse(f"stages the row in shared memory ({self.compact(address)})", node)
                loop.stages.append((stage, stored))
                continue
            loop.packs.append((address, stored))

    def _only_stored(self, name: str) -> bool:
        """Whether the kernel only ever stores to `name`'s elements (`name[...] = v`): an output no thread reads, so
        which thread stores an element, and when, changes nothing another one sees."""
        for ident in descendants(self.src.body, "identifier"):
            if self.text(ident) != name:
                continue
            sub = ident.parent
            assign = sub.parent if sub is not None else None
            if not (
                sub is not None
                and sub.type == "subscript_expression"
                and sub.child_by_field_name("argument") == ident
                and assign is not None
                and assign.type == "assignment_expression"
                and assign.child_by_field_name("left") == sub
                and self.text(assign.child_by_field_name("operator")) == "="
            ):
                return False
        return True

    def _element_names(self, loop: _Loop) -> set[str]:
        """The loop's index and the body's locals computed from it (`int id = row * n + i;`, or declared in the body
        and set from it on every branch: `int at; if (col32) at = f(i); else at = i;`)."""
        element = {loop.var}
        for d in descendants(loop.body, "init_declarator"):
            if self._idents(d.child_by_field_name("value")) & element:
                element.add(self.compact(d.child_by_field_name("declarator")))
        declared = {
            self.text(i)
            for d in descendants(loop.body, "declaration")
            for i in _declared_all(d)
            if not any(c.type == "init_declarator" for c in d.children_by_field_name("declarator"))
        }
        sets: dict[str, list[Node]] = {}
        for a in descendants(loop.body, "assignment_expression"):
            left = a.child_by_field_name("left")
            if left is not None and left.type == "identifier" and self.text(left) in declared:
                sets.setdefault(self.text(left), []).append(a)
        for name, assignments in sets.items():
            if all(
                self.text(a.child_by_field_name("operator")) == "="
                and self._idents(a.child_by_field_name("right")) & element
                for a in assignments
            ):
                element.add(name)
        return element

    def _own_stage(self, address: Node, element: set[str]) -> str | None:
        """S of an address `S + OFFSET` (or `&S[OFFSET]`) where S is a prologue pointer `T* S = D + X;` (or `= D;`,
        or `= reinterpret_cast<T*>(D);`) into the dynamic shared array D (`extern __shared__`) and OFFSET reads only
        the element and template parameters: each thread stages its own packs of the row there, at the element; None
        for any other address."""
        sides = [address.child_by_field_name(f) for f in ("left", "right")]
        if address.type == "pointer_expression" and self.text(address.child_by_field_name("operator")) == "&":
            sub = address.child_by_field_name("argument")
            indices = sub.child_by_field_name("indices") if sub is not None else None
            if sub is None or sub.type != "subscript_expression" or indices is None or indices.named_child_count != 1:
                return None
            sides = [sub.child_by_field_name("argument"), indices.named_children[0]]
        elif address.type != "binary_expression" or self.text(address.child_by_field_name("operator")) != "+":
            return None
        names = {p.name for p in self.src.kernel.template_params}
        pairs = [sides] if address.type == "pointer_expression" else [sides, sides[::-1]]
        for stage, offset in pairs:
            if stage is None or offset is None or stage.type != "identifier" or self.text(stage) not in self.decls:
                continue
            if not self._idents(offset) & element or self._idents(offset) - element - names:
                continue
            decl = self.decls[self.text(stage)][0]
            declarator = decl.child_by_field_name("declarator")
            value = declarator.child_by_field_name("value") if declarator is not None else None
            cast = value is not None and value.type == "call_expression" and len(_args(value)) == 1
            if (
                cast
                and value is not None
                and self.compact(value.child_by_field_name("function")).startswith("reinterpret_cast<")
            ):
                value = _args(value)[0]  # the array's start, retyped: kept as written
                self.stage_starts.add(self.text(stage))
            elif (
                value is not None
                and value.type == "binary_expression"
                and self.text(value.child_by_field_name("operator")) == "+"
            ):
                value = value.child_by_field_name("left")
            array = self.shared.get(self.compact(value))
            if array is not None and declarator is not None and "extern" in self.text(array):
                self.stages[self.text(stage)] = self.compact(value)
                return self.text(stage)
        return None

    def _shared_like(self, name: str) -> bool:
        """Whether `name` is a `__shared__` array or a prologue pointer into a dynamic one (`float* buf = smem;`)."""
        return name in self.shared or (name not in self.staged and self._dynamic_root(name) is not None)

    def _dynamic_root(self, name: str, depth: int = 0) -> str | None:
        """The extern `__shared__` array that `name` is, or that a prologue pointer `name` points into (`T* p = D;`,
        `= D + X;`, `= (T*)D;`, `= reinterpret_cast<T*>(D);`, or such a pointer in turn); None for anything else."""
        if name in self.shared:
            return name if "extern" in self.text(self.shared[name]) else None
        if name not in self.decls or depth > 4:
            return None
        declarator = self.decls[name][0].child_by_field_name("declarator")
        value = declarator.child_by_field_name("value") if declarator is not None else None
        if declarator is None or declarator.type != "init_declarator" or "*" not in self.text(declarator):
            return None
        while value is not None:
            if value.type == "binary_expression" and self.text(value.child_by_field_name("operator")) == "+":
                value = value.child_by_field_name("left")
            elif value.type == "cast_expression":
                value = value.child_by_field_name("value")
            elif (
                value.type == "call_expression"
                and len(_args(value)) == 1
                and self.compact(value.child_by_field_name("function")).startswith("reinterpret_cast<")
            ):
                value = _args(value)[0]
            elif value.type == "parenthesized_expression" and value.named_child_count == 1:
                value = value.named_children[0]
            else:
                break
        if value is None or value.type != "identifier":
            return None
        return self._dynamic_root(self.text(value), depth + 1)

    def _pack_access(self, node: Node, element: set[str]) -> tuple[Node, bool] | None:
        """(address, whether stored) of `v.load(ADDR)` / `v.store(ADDR)` or `*reinterpret_cast<P*>(ADDR)` (read, or
        stored as an assignment's target) with ADDR reading the element; None for other nodes; a refusal for a
        method that takes the element otherwise."""
        if node.type == "pointer_expression":
            cast = node.child_by_field_name("argument")
            while cast is not None and cast.type == "parenthesized_expression" and cast.named_child_count == 1:
                cast = cast.named_children[0]
            if self.text(node.child_by_field_name("operator")) != "*" or cast is None:
                return None
            args = _args(cast) if cast.type == "call_expression" else []
            if len(args) != 1 or not self.compact(cast.child_by_field_name("function")).startswith("reinterpret_cast<"):
                return None
            if not self._idents(args[0]) & element:
                return None
            parent = node.parent
            stored = (
                parent is not None
                and parent.type == "assignment_expression"
                and parent.child_by_field_name("left") == node
            )
            return args[0], stored
        fn = node.child_by_field_name("function")
        args = _args(node)
        if fn is None or fn.type != "field_expression" or not any(self._idents(a) & element for a in args):
            return None
        method = self.compact(fn.child_by_field_name("field"))
        if not re.search(r"load|store", method, re.IGNORECASE) or len(args) != 1:
            self.refuse(f"passes the row's element to `{self.compact(fn)}`, which the rewrite cannot read", node)
        return args[0], "store" in method.lower()

    def _accumulation(self, node: Node, acc: str) -> str:
        """The reduction operator of `acc += e` / `acc = fmaxf(acc, e)`; a refusal for any other update."""
        op = update_op(self.src, node, acc) if node.type == "assignment_expression" else None
        if op in ("sum", "max", "min") and self.text(node.child_by_field_name("operator")) != "-=":
            return op
        self.refuse(f"`{acc}` is carried from element to element in a way that is not a sum, max or min", node)

    def _iterations_own(self, loop: _Loop, name: str) -> bool:
        """Whether `name`, declared before the loops, is each iteration's own: every row loop that names it sets it
        whole before reading it (`v.load(p)`, `v = e`) and nothing outside them uses it, so it stays right however
        many elements a thread runs. False where `loop` does not set it first; a refusal where it does but another
        loop, or a statement outside them, reads what the last iteration left."""
        if not sets_first(self.src, loop.body, name):
            return False
        here = f"`{name}` is set afresh in each iteration of the row loop at line {self.line(loop.node)}, but"
        for other in self.loops:
            own = {self.text(i) for d in descendants(other.body, "declaration") for i in _declared_all(d)}
            if name in self._idents(other.body) and name not in own and not sets_first(self.src, other.body, name):
                self.refuse(
                    f"{here} the row loop at line {self.line(other.node)} reads it before setting it: there it holds "
                    "the element a thread saw last, right only where each thread runs one element",
                    other.node,
                )
        for ident in descendants(self.src.body, "identifier"):
            inside = any(o.node.start_byte <= ident.start_byte < o.node.end_byte for o in self.loops)
            parent = ident.parent
            declared = parent is not None and (
                parent.type == "declaration" or parent.child_by_field_name("declarator") == ident
            )
            if self.text(ident) == name and not inside and not declared:
                self.refuse(
                    f"{here} it is used outside the row loops: the element a thread saw last, which another split of "
                    "the row changes",
                    ident,
                )
        return True

    def _in_update(self, ident: Node, acc: str) -> bool:
        node: Node | None = ident
        while node is not None and node.type not in ("expression_statement", "compound_statement"):
            if node.type == "assignment_expression":
                target = node.child_by_field_name("left")
                return target is not None and self.text(target) == acc
            node = node.parent
        return False

    def _access(self, loop: _Loop, sub: Node) -> None:
        array = sub.child_by_field_name("argument")
        indices = sub.child_by_field_name("indices")
        index = next((c for c in indices.named_children if c.type != "comment"), None) if indices else None
        while index is not None and index.type == "parenthesized_expression" and index.named_child_count == 1:
            index = index.named_children[0]  # `a[(base + i)]`, an index local written out
        if array is None or index is None:
            self.refuse("an element access the rewrite cannot read", sub)
        root = self._dynamic_root(self.compact(array)) if array.type == "identifier" else None
        if root is not None:
            self.staged[self.compact(array)] = root
        elif self.compact(array) in self.shared:
            self.refuse(f"stages the row in shared memory ({self.compact(array)})", sub)
        base: Node | None = None
        if self.compact(index) != loop.var:
            sides = [index.child_by_field_name("left"), index.child_by_field_name("right")]
            is_sum = index.type == "binary_expression" and self.text(index.child_by_field_name("operator")) == "+"
            hits = [s for s in sides if s is not None and self.compact(s) == loop.var]
            others = [s for s in sides if s is not None and self.compact(s) != loop.var]
            if not is_sum or len(hits) != 1 or len(others) != 1 or loop.var in self._idents(others[0]):
                self.refuse(
                    f"reads `{self.compact(sub)}`: the row is not contiguous in `{loop.var}` "
                    f"(only `a[{loop.var}]` and `a[base + {loop.var}]` are)",
                    sub,
                )
            base = others[0]
        if loop.var in self._idents(array):
            self.refuse(f"indexes `{self.compact(array)}` by the element", sub)
        key = (self.compact(array), self.compact(base))
        stream = self.streams.get(key)
        if stream is None:
            stream = self.streams[key] = _Stream(len(self.streams), array, base, register=self.arrays.get(key[0]))
            if stream.register is not None:
                stream.cached = True  # its registers are all there is of it
        loop.accesses.append((sub, stream))
        whole = _whole_value(sub)  # `a[i].x` writes part of the element: the rest must be there to store
        parent = whole.parent
        written = parent is not None and (
            (parent.type == "assignment_expression" and parent.child_by_field_name("left") == whole)
            or parent.type == "update_expression"
        )
        operator = parent.child_by_field_name("operator") if parent is not None else None
        if not written or whole != sub or self.text(operator or parent) != "=":
            if self._conditional(sub, loop.body):
                loop.guarded_reads.setdefault(stream.index, sub)
            else:
                loop.plain_reads.add(stream.index)
            loop.reads.add(stream.index)
        if written:
            loop.writes.add(stream.index)
            statement = parent.parent if parent is not None else None
            top = (
                statement is not None
                and statement.type == "expression_statement"
                and (statement.parent == loop.body or statement == loop.body)
            )
            if not top:
                loop.blind_writes.add(stream.index)

    def _check_loops(self, loops: list[_Loop]) -> None:
        rows = self._row_names()
        for loop in loops:
            for sub, stream in loop.accesses:
                if stream.register is not None or self.compact(stream.array) in self.staged:
                    continue  # a staged row is the block's own (one row a block, then)
                if stream.index in loop.writes and not (
                    self._idents(stream.array) & rows or (stream.base and self._idents(stream.base) & rows)
                ):
                    self.refuse(f"writes `{self.compact(sub)}` at the same place for every row (blockIdx.x)", sub)
            for address, stored in loop.packs:
                if stored and not self._idents(address) & rows:
                    self.refuse(f"stores at `{self.compact(address)}`, the same place for every row (blockIdx.x)")
        if not any(
            self._idents(s.array) & rows or (s.base and self._idents(s.base) & rows) for s in self.streams.values()
        ) and not any(self._idents(address) & rows for loop in loops for address, _ in loop.packs):
            self.refuse("no row loop indexes a row by blockIdx.x: not one block per row")
        for name in self.staged:  # a staged row: each thread reads back only the elements it stored itself
            bases = {self.compact(st.base) for st in self.streams.values() if self.compact(st.array) == name}
            if len(bases) > 1:
                self.refuse(f"reads the row it stages in shared memory ({name}) at other elements than it stores")
            inside = [(lp.node.start_byte, lp.node.end_byte) for lp in loops]
            for ident in descendants(self.src.body, "identifier"):
                outside = not any(a <= ident.start_byte < b for a, b in inside)
                declared = ident.parent is not None and (
                    ident.parent.type in ("array_declarator", "pointer_declarator", "declaration")
                    or ident.parent.child_by_field_name("declarator") == ident
                )
                if self.text(ident) == name and outside and not declared:
                    self.refuse(f"uses the row it stages in shared memory ({name}) outside the row loops", ident)
        for stage in self.stages:  # stored by the first loop that touches it, read by the later ones
            touching = [[stored for name, stored in loop.stages if name == stage] for loop in loops]
            touching = [t for t in touching if t]
            if not all(touching[0]) or any(any(t) for t in touching[1:]):
                self.refuse(f"reads the row it stages in shared memory ({stage}) otherwise than after storing it all")
        for loop in loops:
            self._direct_reads(loop)
        for stream in self.streams.values():
            if stream.register is not None:
                self._check_register(stream, loops)
        seen: set[int] = set()
        for loop in loops:
            touched = loop.reads | loop.writes
            for i in touched:
                stream = next(s for s in self.streams.values() if s.index == i)
                if i in seen and i in loop.reads:
                    stream.cached = True
            seen |= touched

    def _direct_reads(self, loop: _Loop) -> None:
        """An array the loop reads only under a condition (`flag ? (x[i] - b[i]) : x[i]`, a pointer that may be null
        or short) is read where the original reads it, element by element, instead of in packs the rewrite would
        load whatever the condition; the loop must not also write it (its packs are stored after the loop body)."""
        streams = {s.index: s for s in self.streams.values()}
        direct = {
            i for i in loop.guarded_reads if i not in loop.plain_reads and streams[i].register is None
        }  # a register array is never loaded: it stays as it is
        for i in direct & loop.writes:
            self.refuse(
                f"reads `{self.compact(loop.guarded_reads[i])}` only under a condition and writes it too: loading "
                "the row's packs would read it where the original does not (a pointer that may be null or short)",
                loop.guarded_reads[i],
            )
        loop.accesses = [(sub, s) for sub, s in loop.accesses if s.index not in direct]
        loop.reads -= direct

    def _check_register(self, stream: _Stream, loops: list[_Loop]) -> None:
        """A register array's values are the loops' own: the first loop that touches it sets each element before
        anything reads it (its registers start empty in the rewrite, as they do in the original)."""
        if stream.base is not None:
            self.refuse(f"indexes the register array `{self.compact(stream.array)}` off the row's element")
        first = next(loop for loop in loops if stream.index in loop.reads | loop.writes)
        sub = min((sub for sub, s in first.accesses if s is stream), key=lambda n: n.start_byte)
        parent = sub.parent
        right = parent.child_by_field_name("right") if parent is not None else None
        if (
            parent is None
            or parent.type != "assignment_expression"
            or parent.child_by_field_name("left") != sub
            or self.text(parent.child_by_field_name("operator")) != "="
            or stream.index in first.blind_writes
            or self.compact(stream.array) in self._idents(right)
        ):
            self.refuse(f"reads the register array `{self.compact(stream.array)}` before a loop sets it", sub)

    def _row_names(self) -> set[str]:
        """`blockIdx` and every prologue local computed from it (the row pointers and offsets)."""
        rows = {"blockIdx"}
        grew = True
        while grew:
            grew = False
            moved = [(name, decl) for name, (decl, _) in self.decls.items()]
            moved += [(n, s) for s, names in self.rebases.items() for n in names]
            for name, decl in moved:
                if name not in rows and self._idents(decl) & rows:
                    rows.add(name)
                    grew = True
        return rows

    def _idents(self, node: Node | None) -> set[str]:
        return {self.text(i) for i in descendants(node, "identifier")} if node is not None else set()

    # --- segments --------------------------------------------------------------------------------------------

    def _read_segment(self, statements: list[Node], pending: dict[str, str], later: list[Node], last: bool) -> _Segment:
        seg = _Segment([], [], {}, {})
        for s in statements:
            for node in descendants(s, "assignment_expression", "update_expression"):
                target = node.child_by_field_name("left") or node.child_by_field_name("argument")
                if target is not None and target.type != "identifier":
                    root = _root_name(self, target)
                    if self._shared_like(root):
                        continue
                    stat = self._row_stat(node, s)
                    if stat is None:
                        self.refuse(f"writes `{self.compact(target)}` between the row loops", node)
                    seg.stats.append(stat)
        if last and not statements:
            return seg
        self._find_reductions(statements, pending, seg)
        if last and any(not self._is_sync(s) and s.type != "preproc_call" for s in statements) and not seg.reductions:
            self.refuse("does work after the last row loop", next(s for s in statements if not self._is_sync(s)))
        for r in seg.reductions:
            pending.pop(r.acc, None)
            self.reduced.add(r.acc)
        self.reduced |= seg.aliases.keys()
        used_later = set().union(*(self._idents(s) for s in later)) if later else set()
        stored = set().union(*(self._idents(st.store) for st in seg.stats)) if seg.stats else set()
        seg.values = self._find_values(statements, seg, used_later | stored)
        seg.bare = [
            self.text(st)
            for st in statements
            if st.type == "declaration"
            and all(d.type == "identifier" for d in st.children_by_field_name("declarator"))
            and {self.text(d) for d in st.children_by_field_name("declarator")} & used_later
            and not set(self.shared) & {self.text(d) for d in st.children_by_field_name("declarator")}
        ]
        self.valued |= {v.name for v in seg.values}
        self._check_stats(statements, seg)
        assigned = {
            self.text(t)
            for s in statements
            for node in descendants(s, "assignment_expression", "init_declarator")
            if (t := node.child_by_field_name("left") or _declarator_name(node)) is not None and t.type == "identifier"
        }
        scoped = {  # declared in a nested scope of the segment (a loop counter): gone after it
            self.text(i)
            for st in statements
            for d in descendants(st, "declaration")
            if d not in statements
            for i in _declared_all(d)
        }
        assigned -= scoped
        known = {v.name for v in seg.values} | self.reduced
        for name in sorted((assigned & used_later) - known):
            self.refuse(f"`{name}` comes out of the reduction in a form the rewrite cannot trace")
        stale = {a for a in pending if a in used_later and a not in self.reduced}
        if stale and last:
            self.refuse(f"`{sorted(stale)[0]}` is read after the row loops but never reduced over the block")
        return seg

    def _row_stat(self, node: Node, top: Node) -> _Stat | None:
        """`node` as a per-row value stored by the row's first thread: `out[<row>] = v;` in an expression statement
        under `if (tid == 0)` (beside block-uniform conditions, `&&` or nested ifs without else), `out` a
        parameter and the index reading the row; None when it is not one."""
        target, value = node.child_by_field_name("left"), node.child_by_field_name("right")
        operator = node.child_by_field_name("operator")
        if target is None or value is None or target.type != "subscript_expression" or self.text(operator) != "=":
            return None
        array, indices = target.child_by_field_name("argument"), target.child_by_field_name("indices")
        if array is None or array.type != "identifier" or self.text(array) not in self.params:
            return None
        index_names = self._idents(indices)
        if not index_names & self._row_names() or "threadIdx" in self.compact(indices) or _reads(self, indices):
            return None
        statement = node.parent
        if statement is None or statement.type != "expression_statement":
            return None
        firsts = {f"{t}==0" for t in self.thread_names | (self.flat_names if self.flat else set())}
        firsts |= {f"0=={t}" for t in firsts}
        first, conditions, uniform = False, [], self._uniform_names(top)
        current: Node = statement
        while current != top:
            parent = current.parent
            if parent is None:
                return None
            if parent.type == "if_statement":
                if parent.child_by_field_name("alternative") is not None:
                    return None
                for part in _conjuncts(_condition(parent)):
                    if self.compact(part).strip("()") in firsts and not first:
                        first = True
                    elif _reads(self, part) or "threadIdx" in self.compact(part) or self._idents(part) - uniform:
                        return None
                    else:
                        conditions.append(part)
            elif parent.type != "compound_statement":
                return None
            current = parent
        return _Stat(node, conditions) if first else None

    def _check_stats(self, statements: list[Node], seg: _Segment) -> None:
        """Each stored per-row value reads only what every thread has once the reductions are all-reduced, and
        nothing the segment changes after the store."""
        known = set(self.params) | set(self.decls) | self.reduced | self.valued
        for stat in seg.stats:
            value = stat.store.child_by_field_name("right")
            assert value is not None  # _row_stat read it
            deps = self._value_deps(value, seg)
            # memory other threads may have changed; the shared image of a total (`buf[0]`) is the total itself
            reads = [
                n
                for n in _reads(self, value)
                if n.type != "call_expression" and not any(s <= n.start_byte < seg.ends[s] for s in seg.calls)
            ]
            if deps is None or not deps <= known | _functions(self, value) or reads:
                self.refuse(f"stores `{self.compact(stat.store)}` from values the rewrite cannot trace", stat.store)
            for s in statements:
                for node in descendants(s, "assignment_expression", "update_expression"):
                    target = node.child_by_field_name("left") or node.child_by_field_name("argument")
                    if node.start_byte > stat.store.end_byte and self.compact(target) in deps:
                        self.refuse(
                            f"stores `{self.compact(stat.store)}` before `{self.compact(target)}` changes again",
                            stat.store,
                        )

    def _find_reductions(self, statements: list[Node], pending: dict[str, str], seg: _Segment) -> None:
        found: dict[str, str | None] = {}
        images: dict[str, str] = {}  # shared array → the accumulator stored into it
        wide: set[str] = set()  # reduced over the block (cub, or through shared memory), not within a warp only
        shuffles: dict[str, list[Node]] = {}
        helped: set[str] = set()  # reduced over the whole warp by a helper's butterfly (`warp_reduce_sum`)
        for s in statements:
            for call in descendants(s, "call_expression"):
                fn = call.child_by_field_name("function")
                if fn is None:
                    continue
                if fn.type == "field_expression" and "BlockReduce" in self._block_reduce_text(fn):
                    method = self.compact(fn.child_by_field_name("field"))
                    args = _args(call)
                    acc = self._accumulator_arg(args[0] if args else None, pending, call)
                    op = "sum" if method == "Sum" else self._op_name(args[1] if len(args) > 1 else None, call)
                    found[acc] = _merge(found.get(acc), op, acc, self, call)
                    wide.add(acc)
                    seg.calls[call.start_byte] = acc
                    seg.ends[call.start_byte] = call.end_byte
                elif (value := _shuffled(self, call)) is not None:
                    acc = self._accumulator_arg(value, pending, call)
                    found[acc] = _merge(found.get(acc), self._combine_op(call, acc), acc, self, call)
                    shuffles.setdefault(acc, []).append(call)
                elif (helper := self._helper_reduction(call, pending)) is not None:
                    acc, op = helper
                    found[acc] = _merge(found.get(acc), op, acc, self, call)
                    helped.add(acc)
            for node in descendants(s, "assignment_expression"):
                left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
                if left is None or right is None or left.type != "subscript_expression":
                    continue
                root = _root_name(self, left)
                if self._shared_like(root) and self.compact(right) in pending:
                    acc = self.compact(right)
                    self._check_stage_taken(node, s, acc)
                    if acc not in images.values():  # the warps' partials; a later store is of their total
                        self._check_whole_warps(node, acc, shuffles.get(acc, []))
                    images[root] = acc
                    wide.add(acc)
                    found[acc] = _merge(found.get(acc), None, acc, self, node)
        combined: set[str] = set()  # images some step combines: a tree's, a loop over them, or a reduction again
        for s in statements:  # a shared tree's combine step names its operator
            for node in descendants(s, "assignment_expression"):
                left = node.child_by_field_name("left")
                root = _root_name(self, left) if left is not None and left.type == "subscript_expression" else ""
                if root in images:
                    step = self._combine_op(node, None)
                    if step is not None:
                        combined.add(root)
                        found[images[root]] = _merge(found[images[root]], step, images[root], self, node)
                elif left is not None and left.type == "identifier":  # `total += partial[w]`: a loop over partials
                    right = node.child_by_field_name("right")
                    subs = descendants(right, "subscript_expression") if right is not None else []
                    read = {_root_name(self, x) for x in subs if not self._is_first(x)}
                    # `acc = partial[lane]`, reduced again after (a warp's shuffles over the warps' partials)
                    combined |= {i for i in read & images.keys() if images[i] == self.text(left)}
                    step = self._combine_op(node, self.text(left))
                    for image in sorted(read & images.keys()) if step is not None else []:
                        combined.add(image)
                        seg.aliases[self.text(left)] = images[image]
                        seg.combines.setdefault(self.text(left), []).append(node.start_byte)
                        found[images[image]] = _merge(found[images[image]], step, images[image], self, node)
            for sub in descendants(s, "subscript_expression"):
                root = _root_name(self, sub)
                if root in images and self._is_first(sub) and not _is_target(sub):
                    seg.calls[sub.start_byte] = images[root]
                    seg.ends[sub.start_byte] = sub.end_byte
        for image in sorted(images.keys() - combined):  # `if (tid == 0) slot[0] = s;`: one thread's value, broadcast
            self.refuse(
                f"stores `{images[image]}` to shared memory `{image}`, but nothing combines the threads' values"
            )
        for s in statements:
            for ident in descendants(s, "identifier"):
                name = self.text(ident)
                if name in pending and name not in found:
                    self.refuse(
                        f"the block-wide reduction of `{name}` is not one the rewrite can identify "
                        "(cub::BlockReduce, warp shuffles or a shared-memory tree)",
                        ident,
                    )
        for acc in sorted(found.keys() - wide):
            if not self._one_warp():
                self.refuse(
                    f"reduces `{acc}` within a warp only (shuffles, no shared memory or cub), and neither the spec nor "
                    "the launches in the file show that a row's threads are one warp"
                )
            steps = [self._butterfly(call) for call in shuffles.get(acc, [])]  # a loop's offsets, or one step's
            offsets = sorted(o for step in steps for o in step)
            if offsets != [1, 2, 4, 8, 16] and not (acc in helped and not steps):
                shown = f"offsets {offsets}" if all(steps) else "offsets it cannot count"
                self.refuse(f"reduces `{acc}` within a warp by xor shuffles over {shown}, not the whole warp")
        for acc, seen in found.items():
            if seen is not None and seen != pending[acc]:
                self.refuse(f"`{acc}` is accumulated as a {pending[acc]} but reduced as a {seen}")
            seg.reductions.append(_Reduction(acc, pending[acc], self._type_of_name(acc)))

    def _check_stage_taken(self, store: Node, top: Node, acc: str) -> None:
        """The warps' partials of `acc` stored to shared memory (`store`, in the segment's statement `top`) under no
        condition but a test of the thread (which lane stores) or one of the block's shape and compile-time values:
        a stage the arguments may skip (`if (len > kTile) { ... }`) leaves some threads' totals of fewer threads than
        the row's, which a block-wide all-reduce would change."""
        threads, shape, runtime = {"threadIdx"}, {"blockDim"}, set(self.params)
        for decl in self.src.body.named_children:  # the top-level locals: of the thread, of the block's shape, or not
            if decl.type != "declaration":
                continue
            names = {self.text(i) for i in _declared_all(decl)}
            reads = self._idents(decl) - names
            if reads & threads or "thread_rank" in self.text(decl):
                threads |= names
            elif not (reads & runtime) - shape:
                shape |= names
            runtime |= names - shape
        node = store.parent
        while node is not None and node.start_byte >= top.start_byte:
            cond = _condition(node) if node.type == "if_statement" else None
            names = self._idents(cond)
            if cond is not None and not (names & threads or "thread_rank" in self.text(cond)) and names & runtime:
                self.refuse(
                    f"combines the warps' partials of `{acc}` only `if ({_SPACE.sub(' ', self.text(cond))})`: where "
                    "that does not hold, a thread's total is of fewer threads than the row's",
                    node,
                )
            node = node.parent

    def _check_whole_warps(self, store: Node, acc: str, shuffles: list[Node]) -> None:
        """The shuffles of `acc` before its store to shared memory leave the storing lane the whole warp's total: an
        xor butterfly over offsets 1 to 16 (every lane), or shuffles down by those offsets (lane 0); none at all (each
        thread's own value stored). A warp's partial of a tile's or half a warp's threads (`o < kTile`, offsets 8
        down to 1) leaves the other lanes' values out of the original's total, which an all-reduce would count."""
        before = [c for c in shuffles if c.start_byte < store.start_byte]
        if not before:
            return
        for kind in ("xor", "down"):
            steps = [self._butterfly(call, kind) for call in before]
            if all(steps) and sorted(o for step in steps for o in step) == [1, 2, 4, 8, 16]:
                if kind == "down" and not self._first_lane_only(store):
                    self.refuse(
                        f"stores `{acc}`, shuffled down, from lanes other than the first, which alone holds the "
                        "warp's total",
                        store,
                    )
                return
        offsets = [o for kind in ("xor", "down") for call in before for o in self._butterfly(call, kind)]
        shown = f"offsets {sorted(offsets)}" if offsets else "offsets it cannot count"
        self.refuse(
            f"shuffles `{acc}` over {shown} before storing each warp's partial to shared memory: not shown to be "
            "the whole warp's",
            store,
        )

    def _first_lane_only(self, store: Node) -> bool:
        """Whether `store` runs only where an `if` around it tests a lane, thread or rank for 0 (`lane == 0`,
        `!lane`, one conjunct of its condition)."""
        node = store.parent
        while node is not None and node != self.src.body:
            then = node.child_by_field_name("consequence") if node.type == "if_statement" else None
            if then is not None and then.start_byte <= store.start_byte < then.end_byte:
                conjuncts = _conjuncts(_condition(node))
                if any(re.fullmatch(r"!\w+|.+==0|0==.+", self.compact(c)) for c in conjuncts):
                    return True
            node = node.parent
        return False

    def _one_warp(self) -> bool:
        """Whether a row's threads are at most one warp wherever the kernel runs: the spec's block along x at every
        size, or without a spec every launch of the kernel in the file (a literal or a constant of at most 32, or
        the warp size by its usual names), or a warp per row read as rows on y."""
        if self.warp_rows:
            return True
        spec = self.spec
        if spec is not None and spec.block and spec.sizes:
            try:
                block = compile_expr(spec.block[0])
                return all(int(block.evaluate({**spec.scalar_values(size), **size})) <= 32 for size in spec.sizes)
            except (CutuneError, ArithmeticError, KeyError, TypeError, ValueError):
                return False
        launches = launched_block_x(self.src)
        return bool(launches) and all(x is not None and self._warp_wide(call, x) for call, x in launches)

    def _butterfly(self, call: Node, kind: str = "xor") -> list[int]:
        """The lane offsets a shuffle of `kind` (xor, down) exchanges over: its constant offset (a step unrolled by
        hand), or each offset of `for (o = A; COND; UPDATE)` where its offset is the loop's index; [] where it is no
        such shuffle or the offsets cannot be counted."""
        name = re.split(r"\.|::|->", self.compact(call.child_by_field_name("function")))[-1]
        loop = call.parent
        while loop is not None and loop.type != "for_statement":
            loop = loop.parent
        args = _args(call)
        at = 2 if name.startswith("__") else 1  # the offset follows the mask and the value in the intrinsics
        if kind not in name or len(args) <= at:
            return []
        if loop is None:
            offset = self._count(self.text(args[at]))
            return [offset] if offset is not None else []
        init, cond, update = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
        head = re.fullmatch(
            r"(?:const)?(?:unsignedint|unsigned|uint32_t|int32_t|int)?(\w+)=(.+?);?", self.compact(init)
        )
        if head is None or self.compact(args[at]) != head.group(1):
            return []
        var = head.group(1)
        test = re.fullmatch(rf"{var}(>|>=|<|<=)(.+)", self.compact(cond))
        step = re.fullmatch(rf"{var}(>>=|/=|<<=|\*=)(\d+)", self.compact(update))
        start, bound = self._count(head.group(2)), self._count(test.group(2)) if test is not None else None
        if test is None or step is None or start is None or bound is None:
            return []
        offsets: list[int] = []
        o, k = start, int(step.group(2))
        while len(offsets) < 64 and {">": o > bound, ">=": o >= bound, "<": o < bound, "<=": o <= bound}[test.group(1)]:
            offsets.append(o)
            o = {">>=": o >> k, "/=": o // k if k else 0, "<<=": o << k, "*=": o * k}[step.group(1)]
        return offsets

    def _count(self, text: str) -> int | None:
        """An integer known from the text alone: literals, the warp size by name, the file's constants, arithmetic and
        shifts."""
        names: dict[str, int] = {}
        for ident in set(re.findall(r"[A-Za-z_]\w*", text)):
            if ident in _WARP_NAMES:
                names[ident] = 32
                continue
            found = re.search(rf"(?:constexpr\s+[\w:]+\s+{ident}\s*=|#define\s+{ident})\s*(\d+)\b", self.src.model.text)
            if found is None:
                return None
            names[ident] = int(found.group(1))
        return int_value(text, names)

    def _warp_wide(self, call: Node, x: Node) -> bool:
        """Whether a launch's block x is at most a warp."""
        text = self.compact(x)
        if text in _WARP_NAMES:
            return True
        value = launched_value(self.src, call, x)
        return value is not None and value <= 32

    def _block_reduce_text(self, fn: Node) -> str:
        """The text of `X(temp)` in `X(temp).Sum(v)`, with a local alias of cub::BlockReduce resolved."""
        obj = fn.child_by_field_name("argument")
        if obj is None or obj.type != "call_expression":
            return ""
        name = self.compact(obj.child_by_field_name("function"))
        for alias in descendants(self.src.body, "alias_declaration", "type_definition"):
            declared = alias.child_by_field_name("name") or alias.child_by_field_name("declarator")
            if declared is not None and self.compact(declared) == name:
                return self.compact(alias)
        return name

    def _accumulator_arg(self, arg: Node | None, pending: dict[str, str], call: Node) -> str:
        name = self.compact(arg)
        if name not in pending:
            what = f"`{name}`" if name else "nothing"
            self.refuse(
                f"reduces {what}, which is not one accumulator of the row loops: the rewrite cannot keep "
                "the reductions apart",
                call,
            )
        if self._type_of_name(name) not in ("float", "double", "int", "unsigned", "unsigned int", "long long"):
            self.refuse(f"reduces a `{self._type_of_name(name)}`: the rewrite cannot keep its parts apart", call)
        return name

    def _op_name(self, op: Node | None, call: Node) -> str:
        text = self.compact(op).lower()
        for key, name in (("max", "max"), ("min", "min"), ("sum", "sum"), ("plus", "sum"), ("add", "sum")):
            if key in text:
                return name
        self.refuse(f"the reduction operator `{self.compact(op)}` is not one the rewrite recognises", call)

    def _helper_reduction(self, call: Node, pending: dict[str, str]) -> tuple[str, str] | None:
        """(accumulator, operator) of `acc = f(acc);` (or `f<W>(acc)`) where `f` is a `__device__` helper of the file or
        the headers beside it whose body is a butterfly over the whole warp summing or taking the extremum
        (`warp_reduce_sum`); None for any other call."""
        statement = call.parent.parent if call.parent is not None else None
        reduced = REDUCE_CALL.fullmatch(self.text(statement).strip()) if statement is not None else None
        if reduced is None or reduced.group("x") not in pending:
            return None
        acc = reduced.group("x")
        read = helper_butterfly(self.src.model, reduced.group("f"), reduced.group("w"), self._type_of_name(acc), ())
        if not isinstance(read, Butterfly) or read.group != 32:
            return None
        found = _BUTTERFLY_OPS.get("".join(read.combine.split()))
        return (acc, found) if found is not None else None

    def _combine_op(self, node: Node, acc: str | None) -> str | None:
        """The operator of the statement that combines a shuffled or shared value: `+=` or fmaxf(...)."""
        while node.type != "assignment_expression":
            if node.parent is None or node.type in ("expression_statement", "declaration"):
                return None
            node = node.parent
        left = node.child_by_field_name("left")
        if acc is not None and self.compact(left) != acc:
            return None
        op = self.text(node.child_by_field_name("operator") or node)
        right = node.child_by_field_name("right")
        if op == "+=":
            return "sum"
        if op == "=" and right is not None and right.type == "call_expression":
            return EXTREMUM_CALLS.get(self.compact(right.child_by_field_name("function")).removeprefix("::"))
        if op == "=" and right is not None and right.type == "binary_expression":
            return "sum" if self.text(right.child_by_field_name("operator")) == "+" else None
        return None

    def _is_first(self, sub: Node) -> bool:
        indices = sub.child_by_field_name("indices")
        return indices is not None and self.compact(indices) == "[0]"

    def _find_values(self, statements: list[Node], seg: _Segment, used_later: set[str]) -> list[_Value]:
        """The assignments read after the segment whose right side depends only on reduced totals and names
        the loops can see (and the ones those read)."""
        values: list[_Value] = []
        # the file's and its headers' own names (`epsilon`, a macro) read the same everywhere in the kernel
        free = {self.text(i) for s in statements for i in descendants(s, "identifier")} - declared_names(
            self.src, self.src.body
        )
        allowed = set(self.params) | set(self.decls) | self.reduced | (free - set(self.shared))
        for s in statements:
            guarded = self._guarded_update(s, seg, allowed | {v.name for v in values})
            if guarded is not None:
                values.append(guarded)
                continue
            for node in descendants(s, "assignment_expression", "init_declarator"):
                target = node.child_by_field_name("left") or _declarator_name(node)
                rhs = node.child_by_field_name("right") or node.child_by_field_name("value")
                op = node.child_by_field_name("operator")
                if target is None or rhs is None or target.type != "identifier":
                    continue
                if node.type == "init_declarator" and node.parent not in statements:
                    continue  # declared in a nested scope (a shuffle loop's counter): gone after it
                name = self.text(target)
                if op is not None and self.text(op) != "=":  # `variance /= n;`: the total updated in place
                    updated = name in self.reduced or any(v.name == name for v in values)
                    deps = self._value_deps(rhs, seg)
                    # a combine step of the reduction itself (`sum += __shfl_xor_sync(...)`, `sum += partial[w]`)
                    # is what the all-reduce replaces
                    combines = any(_shuffled(self, c) is not None for c in descendants(rhs, "call_expression"))
                    shared = {n for n in self._idents(rhs) if self._shared_like(n)}
                    if updated and node.parent in statements and deps is not None and not combines and not shared:
                        values.append(_Value(name, rhs, "", deps | {name}, self.text(op)))
                    elif updated and not combines and not shared and not _holds(node, seg.calls):
                        # nested in a statement the rewrite does not keep: dropping it would change the total
                        self.refuse(f"updates `{name}` after its reduction inside a statement it cannot place", node)
                    continue
                if name in self.reduced and name in {r.acc for r in seg.reductions} | seg.aliases.keys():
                    # set afresh for a later loop: kept, in order; set afresh before the partials are combined into
                    # it (`s = 0.f; for (w ...) s += partial[w];`), part of the reduction the all-reduce replaces
                    combined = [at for at, acc in seg.calls.items() if acc == name] + seg.combines.get(name, [])
                    if self._is_reset(node, rhs, name, statements) and all(node.start_byte > at for at in combined):
                        values.append(_Value(name, rhs, "", self._idents(rhs)))
                    continue  # the reduction itself, or the variable its partials were combined into
                deps = self._value_deps(rhs, seg)
                if deps is None or not deps <= allowed | {v.name for v in values} | _functions(self, rhs):
                    continue
                values.append(_Value(name, rhs, self._declared_type(name, node), deps))
        needed = set(used_later)
        for v in reversed(values):
            if v.name in needed:
                needed |= v.deps
        kept = [v for v in values if v.name in needed]
        for v in kept:
            if v.op == "=" and sum(w.name == v.name and w.op == "=" for w in kept) > 1:
                self.refuse(f"`{v.name}` is assigned twice from the reduction", v.rhs)
        return kept

    def _is_reset(self, node: Node, rhs: Node, acc: str, statements: list[Node]) -> bool:
        """Whether `node` is `acc = v;` with v reading neither acc, shared memory nor memory at all: the accumulator
        set afresh after its reduction, for a later loop to accumulate again. A refusal when only some threads do."""
        if node.type != "assignment_expression" or _reads(self, rhs) or acc in self._idents(rhs):
            return False
        if any(self._shared_like(n) for n in self._idents(rhs)):
            return False
        if node.parent is None or node.parent not in statements:
            self.refuse(f"sets `{acc}` afresh on a condition after its reduction", node)
        return True

    def _guarded_update(self, s: Node, seg: _Segment, known: set[str]) -> _Value | None:
        """`if (C) { total += e; }` after the reduction, C and e reading no thread index, shared memory nor anything
        but known names: the same for every thread, so kept whole, in order (a softmax's sink added to its sum);
        None for any other statement."""
        if s.type != "if_statement" or descendants(
            s, "for_statement", "while_statement", "do_statement", "return_statement", "break_statement"
        ):
            return None
        updates = descendants(s, "assignment_expression", "update_expression")
        targets = [u.child_by_field_name("left") or u.child_by_field_name("argument") for u in updates]
        names = {self.text(t) for t in targets if t is not None and t.type == "identifier"}
        if not updates or len(names) != 1 or any(t is None or t.type != "identifier" for t in targets):
            return None
        name = names.pop()
        if name not in self.reduced | self.valued or name in self.shared or descendants(s, "declaration"):
            return None
        if _holds(s, seg.calls):  # a step of the reduction itself
            return None
        deps = self._value_deps(s, seg)
        if deps is None or not deps <= known | {name} | _functions(self, s):
            return None
        return _Value(name, s, "", deps | {name}, "if")

    def _value_deps(self, rhs: Node, seg: _Segment) -> set[str] | None:
        """The names a value reads, outside reduction calls; None when it reads a thread index or shared memory."""
        names: set[str] = set()
        for n in descendants(rhs, "identifier", "field_expression"):
            if any(s <= n.start_byte < seg.ends[s] for s in seg.calls):
                continue
            if n.type == "field_expression":
                if self.compact(n.child_by_field_name("argument")) in ("threadIdx", "blockDim"):
                    return None
                continue
            name = self.text(n)
            if name in self.shared and self.shared[name].child_by_field_name("declarator") is not None:
                declarator = self.shared[name].child_by_field_name("declarator")
                if declarator is not None and declarator.type == "array_declarator":
                    return None
            if name not in self.shared and self._shared_like(name):
                return None  # a pointer into the block's shared memory: what it reads is another thread's
            names.add(name)
        return names

    def _declared_type(self, name: str, node: Node) -> str:
        """How to bring a value into the new body: '' to assign a prologue local or parameter, else its type."""
        if node.type == "init_declarator" and node.parent is not None:
            declarator = node.child_by_field_name("declarator")
            stars = ""  # `const __half2* g = ...`: the pointer is the declarator's
            while declarator is not None and declarator.type == "pointer_declarator":
                stars, declarator = f"{stars}*", declarator.child_by_field_name("declarator")
            return _type_of(self, node.parent) + stars
        if name in self.shared:
            return _type_of(self, self.shared[name])
        if name in self.decls or name in self.params or name in self.reduced | self.valued:
            return ""  # declared already: in the prologue, or by an earlier segment (an accumulator set afresh)
        return "auto"

    def _type_of_name(self, name: str) -> str:
        if name in self.decls:
            return self.decls[name][1]
        return "float"

    # --- writing ---------------------------------------------------------------------------------------------

    def _length_cap(self, bound: Node) -> str:
        """K of a row bound `min(n, K)` (either order) whose K is a compile-time constant (literals, the file's
        macros, the kernel's template parameters: a register row's `min(n, ROUNDS * THREADS)`); '' otherwise."""
        if bound.type != "call_expression" or self.compact(bound.child_by_field_name("function")) not in _MIN_CALLS:
            return ""
        constants = constant_names(self.src)
        for arg in _args(bound) if len(_args(bound)) == 2 else []:
            names = {self.text(i) for i in descendants(arg, "identifier")}
            computed = not _reads(self, arg) and not descendants(arg, "call_expression", "field_expression")
            if computed and names <= constants:
                return f"({self.text(arg)})"
        return ""

    def _length_ct(self, bound: Node) -> str:
        """The row bound at compile time where it is arithmetic over specialised sizes (`<SIZE>_CT` template
        parameters) and compile-time constants, e.g. packs of a specialised width `(d + VEC - 1) / VEC`: 0 while any
        of those sizes runs unspecialised; '' where the bound is not such an expression."""
        if _reads(self, bound) or descendants(bound, "call_expression", "field_expression"):
            return ""
        constants = constant_names(self.src)
        names = {self.text(i) for i in [bound, *descendants(bound, "identifier")] if i.type == "identifier"}
        sizes = {n for n in names - constants if self.src.template_param(static_param(n))}
        if not sizes or names - constants - sizes:
            return ""
        expr = self.text(bound)
        for name in sizes:
            expr = re.sub(rf"\b{re.escape(name)}\b", static_param(name), expr)
        specialised = " && ".join(f"{static_param(n)} > 0" for n in sorted(sizes))
        return f"(({specialised}) ? ({expr}) : 0)"

    def _emit(self, prologue: list[Node], loops: list[_Loop], segments: list[_Segment]) -> Variant:
        length = self.compact(loops[0].bound)
        # the specialize recipe's `<LENGTH>_CT` template parameter, when the length is a specialised size
        ct = (
            static_param(length)
            if re.fullmatch(r"\w+", length) and self.src.template_param(static_param(length))
            else self._length_ct(loops[0].bound)
        )
        self.lengths = self._row_lengths(loops[0].bound)
        rows_arg = self.rows_arg = self._rows_arg()
        rows = ROWS if rows_arg else "1"
        self._mark("field_expression", "blockIdx.x", "cutune_row")
        ok = "cutune_row_in" if self.exits else "cutune_row_ok"
        out = [
            *self.fences[0],  # every read of the new body after the wait, as the original's after it
            f"// cutune row_reduce: {THREADS} threads per row, {rows} rows per block, {VEC} elements per access;",
            "// the row stays in registers between the loops when its length is a compile-time constant that fits",
            f"const unsigned int cutune_row = blockIdx.x * {rows} + threadIdx.y;"
            if rows_arg
            else "const unsigned int cutune_row = blockIdx.x;",
            f"const bool {ok} = static_cast<int>(cutune_row) < {rows_arg};" if rows_arg else f"const bool {ok} = true;",
        ]
        out += [self._render(s) for s in self._live_prologue(prologue, loops, segments)]
        if self.exits:  # the block stays for the reductions; its row is left undone as the original leaves it
            stays = " && ".join(f"!({self._render(cond)})" for s in self.exits if (cond := _condition(s)) is not None)
            out.append(f"const bool cutune_row_ok = {ok} && {stays};")
        cap = self._length_cap(loops[0].bound)
        registers = any(s.register is not None for s in self.streams.values())
        # a length known only at run time, one for the whole launch: the row's code is written twice, in its
        # one-pass form where the row fits ROW_CAP packs a thread and as two passes elsewhere; every row of a block
        # takes the same branch, so its reductions' barriers are all in one of them
        bounded = (
            not ct
            and not cap
            and not registers
            and self._uniform_over(loops[0].bound, self._uniform_names(loops[0].node, launch=True), launch=True)
        )
        out.append(f"constexpr int cutune_len_ct = {ct or 0};")
        # the longest row: its length where specialised, else a compile-time cap of the bound (`min(n, K)`)
        longest = f"constexpr int cutune_len_max = {'cutune_len_ct' if ct else cap or 0};"
        if not bounded:
            out.append(longest)
        out += [
            f"const int cutune_len = {self._render(loops[0].bound)};",
            f"constexpr int cutune_step = {THREADS} * {VEC};",
        ]
        rows_code = [
            "constexpr int cutune_chunks = (cutune_len_max + cutune_step - 1) / cutune_step;",
            f"constexpr bool cutune_one_pass = cutune_len_max > 0 && cutune_chunks * {VEC} <= {MAX_CACHED};",
            "const int cutune_steps = cutune_one_pass ? cutune_chunks : (cutune_len + cutune_step - 1) / cutune_step;",
            "constexpr int cutune_group = cutune_one_pass ? cutune_chunks : 1;  // packs loaded before any is used",
            "// every element of every pack lies in the row (the block is ROW_THREADS wide): no bounds to check",
            "constexpr bool cutune_exact = cutune_one_pass && cutune_len_ct > 0 && cutune_len_ct % cutune_step == 0;",
        ]
        for stream in sorted(self.streams.values(), key=lambda s: s.index):
            pack = f"cutune_rr_pack<{self._elem(stream)}, {VEC}>"
            if stream.register is not None:  # as many elements a thread as the original's array holds
                room = f"({stream.register[1]} + {VEC} - 1) / {VEC}"
                rows_code.append(f"{pack} {stream.name}_cache[cutune_one_pass ? cutune_chunks : {room}];")
            elif stream.cached:
                rows_code.append(f"{pack} {stream.name}_cache[cutune_one_pass ? cutune_chunks : 1];")
        seen: set[int] = set()
        for loop, seg in zip(loops, segments, strict=True):
            rows_code += self._emit_loop(loop, seen)
            seen |= loop.reads | loop.writes
            rows_code += self._emit_segment(seg, segments.index(seg))
        if bounded:
            out += [
                f"// or, its length known only at run time, where the row fits {CAP} packs a thread",
                f"if ({CAP} > 0 && cutune_len <= {CAP} * cutune_step) {{",
                f"constexpr int cutune_len_max = {CAP} * cutune_step;",
                *rows_code,
                "} else {",
                longest,
                *rows_code,
                "}",
            ]
        else:
            out += rows_code
        body = "\n".join([*out, *self.fences[1]])
        params = self._params(bool(rows_arg), registers, bounded)
        # rows of fewer threads than a warp offered: a block fills a warp
        sub_warp = any(isinstance(t, int) and t < 32 for t in params[0].values)
        return Variant(
            name="row_reduce",
            body=body,
            params=params,
            constraints=(
                (
                    f"{THREADS} * {ROWS} <= max_threads_per_block",
                    f"{ROWS} == 1 or {THREADS} <= 128",
                    *([ROWS_FILL_WARPS] if sub_warp else []),
                )
                if rows_arg
                else (f"{THREADS} <= max_threads_per_block", *([ROW_FILLS_WARP] if sub_warp else []))
            )
            + ((f"{CAP} * {VEC} <= {MAX_CACHED}",) if bounded else ()),
            launch=self._launch(bool(rows_arg)),
            helpers=HELPERS,
            provenance=Provenance(
                self.t.name,
                note=f"{len(loops)} row loop(s), {sum(len(s.reductions) for s in segments)} reduction(s) "
                f"({', '.join(r.op + ' of ' + r.acc for s in segments for r in s.reductions)}), "
                + (
                    "the row in registers as the original's arrays keep it"
                    if registers
                    else f"one pass over registers when {length} is specialised"
                    if ct
                    else f"one pass over registers where {length} fits {CAP} packs a thread, else two vectorised passes"
                    if bounded
                    else "two vectorised passes"
                ),
            ),
        )

    def _rows_arg(self) -> str:
        """The kernel argument that holds the number of rows (the spec launches that many blocks), when
        several rows per block can help: some row is short, or the spec does not tell how long rows are."""
        spec = self.spec
        if spec is None or len(spec.grid) != 1 or self.stages or self.staged:  # rows would share their staging
            return ""
        # rows share a block only where blockIdx.x alone picks the row: the shared grid has fewer blocks along x
        other = {"blockIdx.y", "blockIdx.z", "gridDim.x", "gridDim.y", "gridDim.z"}
        fields = descendants(self.src.body, "field_expression")
        if self.persistent is not None:  # the loop's own stride (over the grid) is gone: its row's body alone
            fields = [n for n in fields if self.persistent[1] <= n.start_byte < self.persistent[2]]
        if any(self.compact(n) in other for n in fields):
            return ""
        if self.lengths and min(self.lengths) * self._elem_bytes() >= SHORT_ROW_BYTES:
            return ""
        if self.persistent is not None:  # the rows the persistent loop counts
            return f"static_cast<int>({self.persistent[0]})"
        grid = _SPACE.sub("", spec.grid[0])
        for i, arg in enumerate(spec.args):
            if arg.value is not None and _SPACE.sub("", arg.value) == grid and i < len(self.src.kernel.params):
                param = self.src.kernel.params[i]
                if _base_type(param.type) in _INTEGRAL:
                    return param.name
        return ""

    def _row_lengths(self, bound: Node) -> list[int]:
        """The row length at every size of the spec; empty when the spec cannot tell."""
        spec = self.spec
        if spec is None:
            return []
        by_position = {p.name: a.name for p, a in zip(self.src.kernel.params, spec.args, strict=False)}
        # the instantiation's integer template arguments (a pack width `VEC_SIZE = 8`) count as well
        fixed = {n: int(v) for n, v in spec.template_args.items() if re.fullmatch(r"\d+", v.strip())}
        try:
            expr = compile_expr(self.compact(bound))
            lengths = []
            for size in spec.sizes:
                values = spec.scalar_values(size)
                names = {**fixed, **size, **values, **{p: values[a] for p, a in by_position.items() if a in values}}
                lengths.append(int(expr.evaluate(names)))
        except (CutuneError, ArithmeticError, KeyError, TypeError, ValueError):
            return []  # a length over names the spec does not give
        return lengths

    def _elem_bytes(self) -> int:
        """Bytes of the widest array element the spec declares (2, bf16, without a spec)."""
        return max((dtype_size(a.dtype) for a in self.spec.args if a.is_array), default=2) if self.spec else 2

    def _mark(self, node_type: str, text: str, new: str) -> None:
        for n in descendants(self.src.body, node_type):
            if self.compact(n) == text:
                self.replace[n.start_byte] = (n.end_byte, new)

    def _render(self, node: Node, extra: dict[int, tuple[int, str]] | None = None) -> str:
        edits = {**self.replace, **(extra or {})}
        data = self.src.data
        pieces: list[bytes] = []
        pos = node.start_byte
        for start in sorted(s for s in edits if node.start_byte <= s < node.end_byte):
            end, new = edits[start]
            if start < pos or end > node.end_byte:
                continue  # inside a replacement already made
            pieces += [data[pos:start], new.encode()]
            pos = end
        pieces.append(data[pos : node.end_byte])
        return b"".join(pieces).decode("utf-8", errors="replace")

    def _live_prologue(self, prologue: list[Node], loops: list[_Loop], segments: list[_Segment]) -> list[Node]:
        """The prologue declarations the new body still reads (the reduction's shared storage goes)."""
        used: set[str] = set()
        for loop in loops:
            used |= self._idents(loop.body) | self._idents(loop.bound)
            used |= {n for _, s in loop.accesses for n in self._idents(s.array) | self._idents(s.base)}
        for seg in segments:
            used |= {r.acc for r in seg.reductions}
            for v in seg.values:
                used |= v.deps | {v.name}
            for stat in seg.stats:
                used |= self._idents(stat.store) | {n for c in stat.conditions for n in self._idents(c)}
        for s in self.exits:
            used |= self._idents(_condition(s))
        kept: list[Node] = []
        for s in reversed(prologue):
            if s in self.rebases:
                names = set(self.rebases[s])
            elif (misread := _misread_declaration(self, s)) is not None:
                names = {misread[0]}
            elif s.type == "declaration" and s in self.shared.values() and _declared_all(s):
                if self.text(_declared_all(s)[0]) in (set(self.stages.values()) | set(self.staged.values())) & used:
                    kept.append(s)  # the dynamic array the row is staged in
                continue
            elif s.type == "static_assert_declaration":  # a compile-time check of the kernel's own: kept as is
                kept.append(s)
                continue
            elif s.type != "declaration":
                continue
            else:
                names = {self.text(i) for i in _declared_all(s)}
            if names & self.stages.keys() & used:  # staged from the array's start: the reduction no longer uses it
                declarator = s.child_by_field_name("declarator")
                value = declarator.child_by_field_name("value") if declarator is not None else None
                assert value is not None  # _own_stage read it
                if self.text(_declared_all(s)[0]) not in self.stage_starts:
                    self.replace[value.start_byte] = (value.end_byte, self.stages[self.text(_declared_all(s)[0])])
                kept.append(s)
                used.add(self.stages[self.text(_declared_all(s)[0])])
                continue
            if names & used:
                # only the declarators the new body reads (`int bid = blockIdx.x, tid = threadIdx.x;` with `tid`
                # unread: the new body's own thread index stands for it)
                read = [d for d in s.children_by_field_name("declarator") if _declared_text(self, d) in used]
                if any({"threadIdx", "blockDim"} & self._idents(d) or "threadIdx" in self.compact(d) for d in read):
                    self.refuse("derives a value the loops read from the thread index", s)
                if any(e.start_byte < s.start_byte for e in self.exits) and self._uniform_parts(s)[0]:
                    # the rewrite runs the prologue for the rows that left too: a read there may be out of bounds
                    self.refuse("reads memory after the early return, where the rows that leave would read it", s)
                kept.append(s)
                used |= self._idents(s)
        return list(reversed(kept))

    def _elem(self, stream: _Stream) -> str:
        if stream.register is not None:
            return stream.register[0]
        return f"typename cutune_rr_elem<decltype(&({self._render(stream.array)})[0])>::type"

    def _pointer(self, stream: _Stream) -> str:
        array = self._render(stream.array)
        return f"({array}) + ({self._render(stream.base)})" if stream.base is not None else array

    def _emit_loop(self, loop: _Loop, seen: set[int]) -> list[str]:
        """One row loop over ROW_VEC-element packs, in groups (the whole row in the one-pass form, else one
        pack): the group's loads are all issued before any is used, so they are in flight together rather than
        one DRAM round trip after another, then each pack is computed and stored. Rows whose pointers are
        aligned and whose length is a multiple of ROW_VEC load with one vector access per pack and no branch."""
        touched = sorted(loop.reads | loop.writes)
        streams = {s.index: s for s in self.streams.values()}
        memory = [i for i in touched if streams[i].register is None]  # a register array is never loaded nor stored
        loaded = [i for i in memory if i in loop.reads or i in loop.blind_writes]
        grouped = [i for i in loaded if not streams[i].cached]

        def slot(i: int) -> str:
            s = streams[i]
            if s.register is not None:
                return f"{s.name}_cache[cutune_c]"
            if s.cached:
                return f"{s.name}_cache[cutune_one_pass ? cutune_c : 0]"
            return f"{s.name}_group[cutune_c - cutune_g]"

        in_row = "cutune_exact || cutune_base < cutune_len"

        def loads(whole: bool) -> list[str]:
            out = []
            for i in loaded:
                s, ptr = streams[i], self._pointer(streams[i])
                call = (
                    f"cutune_rr_load_whole({slot(i)}, {ptr}, cutune_base, {in_row});"
                    if whole
                    else f"cutune_rr_load({slot(i)}, {ptr}, cutune_base, cutune_len, cutune_row_ok);"
                )
                out.append(f"if constexpr (!cutune_one_pass) {call}" if s.cached and i in seen else call)
            return out

        aligned = " && ".join(f"cutune_rr_whole<{VEC}>({self._pointer(streams[i])}, cutune_len)" for i in memory)
        lines = [
            f"// {self.text(loop.node).splitlines()[0].strip()}",
            "{",
            f"const bool cutune_whole = cutune_row_ok && {aligned or 'true'};",
            *(
                f"cutune_rr_pack<{self._elem(streams[i])}, {VEC}> {streams[i].name}_group[cutune_group];"
                for i in grouped
            ),
            "#pragma unroll",
            "for (int cutune_g = 0; cutune_g < cutune_steps; cutune_g += cutune_group) {",
        ]
        if loaded:
            # any other row loads each pack just before its use: the rare path, kept light on registers
            lines += ["  if (cutune_whole) {", *_indent_all([*_chunks(), *_indent_all(loads(True), "  "), "}"], "    ")]
            lines += ["  }"]
        lines += _indent_all(_chunks(), "  ")
        if loaded:
            lines += ["    if (!cutune_whole) {", *_indent_all(loads(False), "      "), "    }"]
        for i in touched:
            s = streams[i]
            if s.cached or i in grouped:
                lines.append(f"    auto& {s.name} = {slot(i)};")
            else:
                lines.append(f"    cutune_rr_pack<{self._elem(s)}, {VEC}> {s.name};")
        extra = {sub.start_byte: (sub.end_byte, f"{s.name}.v[cutune_v]") for sub, s in loop.accesses}
        body = self._render(loop.body, extra)
        if loop.body.type != "compound_statement":
            body = "{ " + body + " }"
        lines += [
            "#pragma unroll",
            f"    for (int cutune_v = 0; cutune_v < {VEC}; ++cutune_v) {{",
            f"      const {_base_type(loop.var_type) or 'int'} {loop.var} = cutune_base + cutune_v;",
            f"      if (cutune_row_ok && (cutune_exact || {loop.var} < cutune_len)) "
            + _indent(body, "      ").lstrip(),
            "    }",
        ]
        for i in memory:
            if i in loop.writes:
                s = streams[i]
                lines.append(
                    f"    cutune_rr_store({self._pointer(s)}, {s.name}, cutune_base, cutune_len, cutune_row_ok, "
                    f"cutune_whole, {in_row});"
                )
        lines += ["  }", "}", "}"]
        return lines

    def _emit_segment(self, seg: _Segment, k: int) -> list[str]:
        lines: list[str] = list(seg.bare)
        for j, r in enumerate(seg.reductions):
            smem = f"cutune_red{k}_{j}"
            warps = f"({THREADS} > 32 ? {THREADS} / 32 : 1)"
            # each row of threads along y its own slots (only where rows share a block: the body reads no y else)
            slots = f"{smem} + threadIdx.y * {warps}" if self.rows_arg else smem
            lines += [
                f"__shared__ {r.type} {smem}[{self._rows()} * {warps}];",
                f"{r.acc} = {ALLREDUCE}<{THREADS}>({r.acc}, {_OPS[r.op]}{{}}, {slots});",
            ]
        types = {r.acc: r.type for r in seg.reductions}
        for alias, acc in seg.aliases.items():  # the combined partials are the block's total
            if alias != acc:  # partials combined back into the accumulator itself: it holds the total already
                lines.append(f"{alias} = {acc};" if alias in self.decls else f"{types[acc]} {alias} = {acc};")
        calls = {start: (seg.ends[start], acc) for start, acc in seg.calls.items()}
        extra = {start: (end, acc) for start, (end, acc) in calls.items()}
        for v in seg.values:
            rhs = self._render(v.rhs, extra)
            if v.op == "if":  # a guarded update of a total, kept whole
                lines.append(rhs)
                continue
            lines.append(f"{v.declare} {v.name} = {rhs};" if v.declare else f"{v.name} {v.op} {rhs};")
        for stat in seg.stats:  # the row's first thread, as in the original, once every thread has the values
            conditions = [f"({self._render(c)})" for c in stat.conditions]
            when = " && ".join(["cutune_row_ok", "threadIdx.x == 0", *conditions])
            lines.append(f"if ({when}) {self._render(stat.store, extra)};")
        return lines

    def _rows(self) -> str:
        return ROWS if self.rows_arg else "1"

    def _params(self, rows: bool, registers: bool = False, bounded: bool = False) -> tuple[TunableParam, ...]:
        vec = tuple(dict.fromkeys(max(1, b // self._elem_bytes()) for b in (8, 16)))  # 8- and 16-byte accesses
        if not self.streams:  # the row's elements are packs its pack type loads already: one a thread per access
            vec = (1,)
        # more threads than the longest row has packs would only idle; so few that the longest row cannot stay
        # in registers (MAX_CACHED elements a thread) would stream it through small blocks
        longest = max(self.lengths, default=0)
        smallest = self._launched_threads(smallest=True)
        # fewer than a warp's threads a row (several rows a warp, reduced over their own lanes) where rows are short:
        # as the longest known row allows, or, where the spec cannot tell, where the host launches small blocks
        sub_warp = (8, 16) if longest or smallest <= SHORT_BLOCK else ()
        threads = tuple(
            t
            for t in (*sub_warp, 32, 64, 128, 256, 512, 1024)
            if not longest or ((t == 32 or t * vec[0] <= longest) and (t == 1024 or t * MAX_CACHED >= longest))
        )
        pinned = registers and any(
            s.register is not None and THREADS not in s.register[1] for s in self.streams.values()
        )
        if pinned:
            # the original's arrays hold a thread's elements of any row its launch runs, so as many registers a
            # thread hold the row where a row has at least as many threads as the original launch gives it (arrays
            # sized in ROW_THREADS' terms hold it at any count)
            floor = self._launched_threads()
            threads = tuple(t for t in dict.fromkeys((*threads, 1024)) if t >= floor)
        # a thread count the variant can run (the original's pin needs it among the values): 256, else the nearest
        default = threads[-1] if pinned else min(threads, key=lambda t: (abs(t - 256), t))
        # where the spec cannot tell the row's length, the host's block for its smallest row can: a launcher that
        # sizes the block to the row (a warp doubled up to it) and gives fewer threads than the default has short
        # rows, which the default's idle threads and barriers would slow; the search first tries as many threads as
        # cover those elements ROW_VEC a thread (never fewer than a warp where a row has its block to itself)
        cover = max(smallest // vec[-1], 1 if rows else 32)
        if self.lengths:  # where the rows' lengths are known, as many threads as cover the longest ROW_VEC a thread
            cover = next((t for t in threads if t * vec[-1] >= longest), default)
        first = cover if not pinned and cover < default and cover in threads else None
        params = [
            TunableParam(THREADS, threads, default, Binding.TEMPLATE, description="threads per row", try_first=first)
        ]
        if rows:
            # first tried at four rows a block: the (32, 4) blocks of a warp a row that launchers of short rows use,
            # and block_items' first ITEMS_Y
            params.append(
                TunableParam(ROWS, (1, 2, 4, 8), 1, Binding.TEMPLATE, description="rows per block", try_first=4)
            )
        params.append(
            TunableParam(VEC, vec, vec[-1], Binding.TEMPLATE, description="consecutive elements per load and store")
        )
        if bounded:
            params.append(
                TunableParam(
                    CAP,
                    (0, 1, 2, 4, 8, 16),
                    0,
                    Binding.TEMPLATE,
                    description="packs a thread keeps in registers where the row fits them (0: two passes)",
                )
            )
        return tuple(params)

    def _launched_threads(self, smallest: bool = False) -> int:
        """The most (or, `smallest`, the fewest) threads per block the spec's launch runs at any of its sizes;
        without them, the most a block can have."""
        spec = self.spec
        if spec is None or not spec.block or not spec.sizes:
            return 1024
        try:
            block = compile_expr(spec.block[0])
            counts = [int(block.evaluate({**spec.scalar_values(size), **size})) for size in spec.sizes]
        except CutuneError:
            return 1024
        return min(counts) if smallest else max(counts)

    def _launch(self, rows: bool) -> Launch:
        grid = self.spec.grid if self.spec is not None else ("num_rows",)
        first = rows_grid(grid[0], rows)
        # a row staged in dynamic shared memory needs the original's allocation (it starts at the array's start)
        shared = "{shared_mem}" if self.stages or self.staged else "0"
        return Launch(grid=(first, *grid[1:]), block=(THREADS, ROWS if rows else "1"), shared_mem=shared)


def rows_grid(grid_x: str, rows: bool, workers: bool = False) -> str:
    """The blocks over `grid_x` rows at once (a persistent loop's workers, ROW_WORKERS times as many where
    `workers`), ROWS_PER_BLOCK of them a block where `rows`."""
    x = f"({grid_x}) * {WORKERS}" if workers else grid_x
    return f"ceil_div({x}, {ROWS})" if rows else x


def _instantiated(src: KernelSource, spec: KernelSpec | None, condition: str, value: bool) -> bool:
    """Whether the spec's instantiation may take the arm where `condition` (a template parameter) is `value`: no spec,
    an argument that is not a literal, or a literal (else the parameter's default) of that truth."""
    if spec is None:
        return True
    param = next((p for p in src.kernel.template_params if p.name == condition), None)
    arg = spec.template_args.get(condition, param.default if param is not None else None)
    literal = literal_value(str(arg)) if arg is not None else None
    return literal is None or bool(literal) == value


def _bounded_rows(src: KernelSource, spec: KernelSpec | None) -> str | None:
    """For one row per block (`blockIdx.x`, or a local holding it) that leaves at `if (row >= N) return;` with N an
    integer parameter never written: the spec's value of N, where the spec's grid holds at least that many blocks at
    every size (every row below N runs in the original, none from N on does, so a grid of N rows computes the same).
    None otherwise."""
    if spec is None or not spec.sizes:
        return None
    rows = {"blockIdx.x"} | {k for k, v in local_values(src).items() if index_form(v) == "blockIdx.x"}
    written = written_names(src, src.body)
    params = {p.name: i for i, p in enumerate(src.kernel.params) if _base_type(p.type) in _INTEGRAL}
    for s in src.body.named_children:
        cond, then = s.child_by_field_name("condition"), s.child_by_field_name("consequence")
        if s.type != "if_statement" or cond is None or then is None or s.child_by_field_name("alternative"):
            continue
        if _SPACE.sub("", node_text(src.data, then)) not in ("return;", "{return;}"):
            continue
        test = _SPACE.sub("", node_text(src.data, cond))[1:-1]
        pair = test.split(">=") if ">=" in test else test.split("<=")[::-1]
        if len(pair) == 2 and test.count("=") == 1:
            row, bound = pair
            if index_form(row) in rows and bound in params and bound not in written and params[bound] < len(spec.args):
                value = spec.args[params[bound]].value
                try:
                    grid = compile_expr(spec.grid[0])
                    count = compile_expr(value) if value is not None else None
                    covered = count is not None and all(
                        int(grid.evaluate({**spec.scalar_values(z), **z}))
                        >= int(count.evaluate({**spec.scalar_values(z), **z}))
                        for z in spec.sizes
                    )
                except (CutuneError, ArithmeticError, KeyError, TypeError, ValueError):
                    covered = False
                return value if covered else None
    return None


def _block_x(spec: KernelSpec | None) -> list[int] | None:
    """The spec's block along x at each of its sizes; None without a spec or sizes, or where it cannot be read."""
    if spec is None or not spec.block or not spec.sizes:
        return None
    try:
        block = compile_expr(spec.block[0])
        return [int(block.evaluate({**spec.scalar_values(size), **size})) for size in spec.sizes]
    except (CutuneError, ArithmeticError, KeyError, TypeError, ValueError):
        return None


def _under_directive(src: KernelSource) -> tuple[str, str] | None:
    """For a body that is one `#ifdef X` / `#if C` block without `#else` (the kernel does nothing where it is not
    compiled in), after declarations at most (a specialised size's `const int n = N_CT > 0 ? N_CT : n_rt;`): the
    file's text with the directive's two lines blanked, and its opening line; else None."""
    statements = [c for c in src.body.named_children if c.type != "comment"]
    if not statements or statements[-1].type not in ("preproc_ifdef", "preproc_if"):
        return None
    if any(s.type != "declaration" or descendants(s, "call_expression") for s in statements[:-1]):
        return None  # work done whatever the directive says
    block = statements[-1]
    if block.child_by_field_name("alternative") is not None or block.children[-1].type != "#endif":
        return None
    line_end = src.data.find(b"\n", block.start_byte, block.end_byte)
    if line_end < 0 or src.data[:line_end].rstrip().endswith(b"\\"):  # a condition continued on the next line
        return None
    opening = src.data[block.start_byte : line_end].decode("utf-8")
    end = block.children[-1]
    edits = EditList(src.data)  # blanked, not removed: the lines the rewrite's notes name stay the file's
    edits.replace(block.start_byte, line_end, " " * (line_end - block.start_byte))
    edits.replace(end.start_byte, end.end_byte, " " * (end.end_byte - end.start_byte))
    return apply_edits(src.model.text, edits.edits), opening


def _guarded_rest(src: KernelSource) -> tuple[Node, Node, str] | None:
    """For a body that is declarations and then `if (cond) { rest }` with no else and no row loop before it: the
    if statement, its condition and the text of rest; else None."""
    statements = [c for c in src.body.named_children if c.type != "comment"]
    if not statements or any(s.type != "declaration" for s in statements[:-1]):
        return None
    last = statements[-1]
    then = last.child_by_field_name("consequence")
    if last.type != "if_statement" or last.child_by_field_name("alternative") is not None or then is None:
        return None
    if then.type != "compound_statement" or not descendants(then, "for_statement"):
        return None
    cond = _condition(last)
    return (last, cond, node_text(src.data, then)[1:-1]) if cond is not None else None


def _persistent_rows(src: KernelSource) -> tuple[Node, str, str] | None:
    """For a body that is declarations and then `for (int r = blockIdx.x; r < R; r += gridDim.x) {...}` (rows
    over a persistent grid, r and R unchanged inside): the loop, r and R; else None."""
    statements = [c for c in src.body.named_children if c.type != "comment" and not _is_launch_control(src, c)]
    if not statements or any(s.type != "declaration" for s in statements[:-1]):
        return None
    loop = statements[-1]
    if loop.type != "for_statement":
        return None
    values = local_values(src)  # the row and the step may be spelled through locals (`row = worker; row += workers`)
    init, cond, update = (loop.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    body = loop.child_by_field_name("body")
    if init is None or cond is None or update is None or body is None:
        return None
    head = re.fullmatch(
        r"(?:const)?(?:unsigned)?(?:int|int64_t|size_t|long|uint32_t|uint64_t)(\w+)=(\w+(?:\.x)?);?",
        "".join(node_text(src.data, init).split()),
    )
    if head is None or index_form(values.get(head.group(2), head.group(2))) != "blockIdx.x":
        return None
    var = head.group(1)
    test = re.fullmatch(rf"{var}<(.+)", "".join(node_text(src.data, cond).split()))
    step = re.fullmatch(rf"{var}\+=(\w+(?:\.x)?)", "".join(node_text(src.data, update).split()))
    if test is None or step is None or index_form(values.get(step.group(1), step.group(1))) != "gridDim.x":
        return None
    right = cond.child_by_field_name("right")
    if right is None:
        return None
    bound = node_text(src.data, right)
    written = written_names(src, body)
    if var in written or set(re.findall(r"[A-Za-z_]\w*", bound)) & written:
        return None
    return loop, var, bound


def _flat_forms(x: str, y: str) -> set[str]:
    """The spellings (compact) of thread y * blockDim.x + x: a 2-D block's threads numbered in order."""
    return {f"{y}*blockDim.x+{x}", f"{x}+{y}*blockDim.x", f"blockDim.x*{y}+{x}", f"{x}+blockDim.x*{y}"}


_PDL_TRIGGER = "cudaTriggerProgrammaticLaunchCompletion()"


def _is_launch_control(src: KernelSource, s: Node) -> bool:
    """Whether `s` only controls the programmatic dependent launch: `asm volatile("griddepcontrol.wait;")` (or
    `.launch_dependents`) without operands, or the runtime's `cudaGridDependencySynchronize()` /
    `cudaTriggerProgrammaticLaunchCompletion()`, alone or all there is under an `#if` without `#else`."""
    if s.type in ("preproc_if", "preproc_ifdef"):
        if s.child_by_field_name("alternative") is not None:
            return False
        inner = [c for c in s.named_children if c.type not in ("comment", "identifier") and c.start_byte > s.start_byte]
        inner = [c for c in inner if c != s.child_by_field_name("condition")]
        return bool(inner) and all(_is_launch_control(src, c) for c in inner)
    asm = s.named_children[0] if s.type == "expression_statement" and s.named_children else None
    if asm is not None and asm.type == "call_expression":  # the runtime's device API for the same two instructions
        return _SPACE.sub("", src.text(asm)) in ("cudaGridDependencySynchronize()", _PDL_TRIGGER)
    if asm is None or asm.type != "gnu_asm_expression":
        return False
    operands = [c for c in asm.named_children if c.type.endswith("operand_list") and c.named_children]
    code = asm.child_by_field_name("assembly_code")
    text = _SPACE.sub("", src.text(code)) if code is not None else ""
    return not operands and re.fullmatch(r'"griddepcontrol\.(wait|launch_dependents);?"', text) is not None


def _reads(w: _Rewriter, node: Node | None) -> list[Node]:
    """The memory reads and calls in an expression (a conversion is neither): what may differ between threads or
    change under them."""
    found = descendants(node, "call_expression", "subscript_expression", "pointer_expression") if node else []
    return [n for n in found if not (n.type == "call_expression" and _is_cast(w, n))]


def _is_cast(w: _Rewriter, call: Node) -> bool:
    """Whether a call is a conversion: `static_cast<T>(v)` or an integer type's functional cast (`int64_t(row)`)."""
    return w.compact(call).startswith("static_cast<") or w.compact(call.child_by_field_name("function")) in _INTEGRAL


def _condition(statement: Node) -> Node | None:
    """An if statement's condition without its parentheses."""
    cond = statement.child_by_field_name("condition")
    if cond is not None and cond.type in ("condition_clause", "parenthesized_expression"):
        inner = cond.child_by_field_name("value") or next(iter(cond.named_children), None)
        return inner if inner is not None else cond
    return cond


def _conjuncts(cond: Node | None) -> list[Node]:
    """The parts of `a && b && ...` (the condition itself when it is no conjunction)."""
    if cond is None:
        return []
    while cond.type == "parenthesized_expression" and cond.named_child_count == 1:
        cond = cond.named_children[0]
    operator = cond.child_by_field_name("operator")
    if cond.type == "binary_expression" and operator is not None and operator.type == "&&":
        return [*_conjuncts(cond.child_by_field_name("left")), *_conjuncts(cond.child_by_field_name("right"))]
    return [cond]


def _merge(old: str | None, new: str | None, acc: str, w: _Rewriter, node: Node) -> str | None:
    """Two sightings of one reduction's operator: they must agree."""
    if old is not None and new is not None and old != new:
        w.refuse(f"`{acc}` is combined both as a {old} and as a {new}", node)
    return new if new is not None else old


def _shuffled(w: _Rewriter, call: Node) -> Node | None:
    """The value a warp shuffle exchanges (`__shfl_xor_sync(mask, v, o)`, a tile's `g.shfl_down(v, o)`, a wrapper
    `math::shfl_xor_sync(v, o)`), or None when `call` is not a shuffle."""
    name = re.split(r"\.|::|->", w.compact(call.child_by_field_name("function")))[-1]
    if not _SHUFFLE.fullmatch(name):
        return None
    args = _args(call)
    at = 1 if name.startswith("__") and name.endswith("_sync") else 0  # the intrinsics' mask comes first
    return args[at] if len(args) > at else None


def _whole_value(sub: Node) -> Node:
    """The expression whose value `sub` is part of through member accesses: `a[i].x` for `a[i]`, else `sub`."""
    node = sub
    while (
        node.parent is not None
        and node.parent.type == "field_expression"
        and node.parent.child_by_field_name("argument") == node
    ):
        node = node.parent
    return node


def _misread_declaration(w: _Rewriter, s: Node) -> tuple[str, str] | None:
    """(name, type) of a declaration `T<N> name = value;` that tree-sitter, not knowing T for a template, read as the
    comparison `(T < N) > (name = value)` (`cg::thread_block_tile<32> g = ...`); None for any other statement."""
    expr = s.named_children[0] if s.type == "expression_statement" and s.named_children else None
    if expr is None or expr.type != "binary_expression" or w.text(expr.child_by_field_name("operator")) != ">":
        return None
    left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
    if left is None or right is None or left.type != "binary_expression" or right.type != "assignment_expression":
        return None
    name = right.child_by_field_name("left")
    if w.text(left.child_by_field_name("operator")) != "<" or name is None or name.type != "identifier":
        return None
    if w.text(right.child_by_field_name("operator")) != "=" or not re.fullmatch(r"[\w:]+<[^<>;]*", w.compact(left)):
        return None
    return w.text(name), f"{w.compact(left)}>"


def _args(call: Node) -> list[Node]:
    args = call.child_by_field_name("arguments")
    return [a for a in args.named_children if a.type != "comment"] if args is not None else []


def _declarator_name(node: Node) -> Node | None:
    """The identifier an init declarator declares (`p` of `const T* p = v`), None for other nodes."""
    declarator = node.child_by_field_name("declarator")
    return declared_identifier(declarator) if declarator is not None else None


def _declared_text(w: _Rewriter, declarator: Node) -> str:
    """The name one declarator declares ('' where it declares none)."""
    name = declared_identifier(declarator)
    return w.text(name) if name is not None else ""


def _declared_all(decl: Node) -> list[Node]:
    return [i for d in decl.children_by_field_name("declarator") if (i := declared_identifier(d)) is not None]


def _type_of(w: _Rewriter, decl: Node) -> str:
    """A declaration's type without storage and sharing qualifiers, e.g. `float` for `__shared__ float s;`."""
    type_node = decl.child_by_field_name("type")
    text = w.text(type_node) if type_node is not None else "auto"
    qualifiers = [w.text(c) for c in decl.children if c.type == "type_qualifier" and w.text(c) == "const"]
    return " ".join([*qualifiers, text])


def _base_type(type_text: str) -> str:
    return " ".join(re.sub(r"\b(const|volatile|__restrict__|__restrict|static)\b", " ", type_text).split())


def _holds(node: Node, starts: Iterable[int]) -> bool:
    """Whether one of the byte offsets `starts` (a reduction call's) lies inside `node`."""
    return any(node.start_byte <= at < node.end_byte for at in starts)


def _root_name(w: _Rewriter, node: Node) -> str:
    """The variable at the root of `a[i]`, `a[i][j]`, `*p`, `s.f`."""
    return w.text(root_variable(node))


def _is_target(sub: Node) -> bool:
    parent = sub.parent
    return parent is not None and parent.type == "assignment_expression" and parent.child_by_field_name("left") == sub


def _functions(w: _Rewriter, node: Node) -> set[str]:
    """Names called as functions in an expression (rsqrtf, expf, ...): not data."""
    names = set()
    for call in descendants(node, "call_expression"):
        f = call.child_by_field_name("function")
        while f is not None and f.type == "qualified_identifier":  # `math::rsqrt(v)`
            f = f.child_by_field_name("name")
        if f is not None and f.type == "template_function":  # `reinterpret_cast<const __half2*>(p)`
            f = f.child_by_field_name("name")
        if f is not None and f.type == "identifier":
            names.add(w.text(f))
    return names


def _chunks() -> list[str]:
    """The opening of an unrolled loop over the group's packs cutune_c and this thread's first element of each."""
    return [
        "#pragma unroll",
        "for (int cutune_c = cutune_g; cutune_c < cutune_g + cutune_group; ++cutune_c) {",
        f"  const int cutune_base = (cutune_c * {THREADS} + static_cast<int>(threadIdx.x)) * {VEC};",
    ]


def _indent_all(lines: list[str], pad: str) -> list[str]:
    return [line if line.startswith("#") else pad + line for line in lines]


def _indent(text: str, pad: str) -> str:
    return "\n".join(pad + line if line.strip() else line for line in text.splitlines())
