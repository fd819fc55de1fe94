"""The built-in transforms: what they rewrite (checked textually and by compiling), and where they refuse,
with the reason they state."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.spec import load_spec
from cutune.template.variants import TRANSFORMS, GridShape, PacksPerThread, Vectorize, propose_variants, with_variants
from tests.cuda.test_extract import needs_nvrtc

from .compile import compile_both, name_expressions
from .test_combine import ELEMENTWISE

SAMPLES = Path(__file__).resolve().parents[3] / "samples"


def _refusal(transform: object, source: str, kernel: str = "k") -> str:
    with pytest.raises(TransformRefused) as caught:
        transform.apply(parse_source(source), kernel, None)  # type: ignore[attr-defined]
    return caught.value.reason


GRID_STRIDE = """
template <typename T>
__global__ void k(T* __restrict__ y, const T* __restrict__ x, float a, long n) {
  const long stride = (long)blockDim.x * gridDim.x;
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = static_cast<T>(a * static_cast<float>(x[i]) + static_cast<float>(y[i]));
  }
}
"""


def test_vectorize_packs_contiguous_subscripts_with_a_runtime_alignment_check_and_a_tail() -> None:
    variant = Vectorize().apply(parse_source(GRID_STRIDE), "k", None)
    body = variant.body
    assert "cutune_vec_load<cutune_vec_w0>(&x[(0) + cutune_vec_p0 * cutune_vec_w0])" in body
    assert "cutune_vec_load<cutune_vec_w0>(&y[(0) + cutune_vec_p0 * cutune_vec_w0])" in body  # in place: read too
    assert "cutune_vec_store<cutune_vec_w0>(&y[(0) + cutune_vec_p0 * cutune_vec_w0]" in body
    assert "reinterpret_cast<unsigned long long>(&x[0]) % (sizeof(x[0]) * cutune_vec_w0) == 0" in body
    assert (
        "for (long i = static_cast<long>(cutune_vec_done0 + ((long)blockIdx.x * blockDim.x + threadIdx.x)); i < n"
        in body
    )
    # blockDim is read outside the loop header, but only in the local that holds its stride: any grid, not any block
    assert {p.name for p in variant.params} == {"VEC_BYTES", "PACKS", "GRID_DIV"}
    assert variant.launch is not None and variant.launch.grid == ("max(1, ceil_div({grid}, GRID_DIV))",)
    assert variant.launch.block == ("{block}",)


def test_vectorize_stores_planes_a_whole_bound_apart_as_packs_and_refuses_planes_that_may_meet() -> None:
    loop = (
        "__global__ void k(unsigned char* __restrict__ o, const unsigned char* __restrict__ x, int n, int m) {{\n"
        "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {{ {} }}\n}}"
    )
    planes = "o[i] = x[i] & 3; o[i + n] = x[i] >> 2; o[n * 2 + i] = x[i] >> 4; o[3 * n + i] = x[i] >> 6;"
    body = Vectorize().apply(parse_source(loop.format(planes)), "k", None).body
    for base in ("0", "n", "n * 2", "3 * n"):  # each plane a pack stream of its own, its start checked aligned
        assert f"cutune_vec_store<cutune_vec_w0>(&o[({base}) + cutune_vec_p0 * cutune_vec_w0]" in body
    assert "reinterpret_cast<unsigned long long>(&o[3 * n]) %" in body
    # offsets less than a bound apart, or of another length, may reach elements the other plane writes
    for near in (
        "o[i] = x[i]; o[i + n - 1] = x[i];",
        "o[i] = x[i]; o[i + m] = x[i];",
        "o[i] = x[i]; o[i + n] = o[i + 1];",
    ):
        assert "writes o as a pack and also accesses it otherwise" in _refusal(Vectorize(), loop.format(near)), near


def test_vectorize_refusals_state_the_reason() -> None:
    loop = (
        "__global__ void k(float* o, const float* x, int n) {{\n"
        "  for (int i = threadIdx.x; i < n; i += blockDim.x) {{ {} }}\n}}"
    )
    assert "steps by `2`: not a block- or grid-stride loop" in _refusal(
        Vectorize(), "__global__ void k(float* o, int n) { for (int i = 0; i < n; i += 2) o[i] = 0; }"
    )
    assert "has threads cooperate through __syncthreads" in _refusal(
        Vectorize(), loop.format("o[i] = x[i]; __syncthreads();")
    )
    assert "leaves the loop early" in _refusal(Vectorize(), loop.format("if (x[i] < 0) break; o[i] = x[i];"))
    assert "changes its index i" in _refusal(Vectorize(), loop.format("o[i] = x[i]; i += 1;"))
    assert "writes o as a pack and also accesses it otherwise" in _refusal(Vectorize(), loop.format("o[i] = o[i + 1];"))
    assert "has no contiguous subscript `a[base + i]`" in _refusal(Vectorize(), loop.format("o[2 * i] = x[i / 2];"))
    assert "takes the address of o[i]" in _refusal(Vectorize(), loop.format("float* p = &o[i]; *p = x[i];"))
    assert "changes n, which its bound reads" in _refusal(Vectorize(), loop.format("o[i] = x[i]; n -= 1;"))


GUARDED = """
__global__ void k(const float* __restrict__ x, const float* __restrict__ scale, float* __restrict__ y,
                  unsigned short* __restrict__ codes, int rows, int columns) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < columns; c += blockDim.x * gridDim.x) {
    if (row >= rows) continue;
    const float q = rintf(x[row * columns + c] / scale[c]);
    if (codes) codes[row * columns + c] = static_cast<unsigned short>(q);
    y[row * columns + c] = q * scale[c];
  }
}
"""


def test_vectorize_leaves_scalar_what_the_original_touches_only_where_a_condition_keeps_its_address_valid() -> None:
    body = Vectorize().apply(parse_source(GUARDED), "k", None).body
    # the row's arrays: read and written only for a row in range (a pack past the last row would be out of bounds)
    assert "cutune_vec_load<cutune_vec_w0>(&x[" not in body and "cutune_vec_store<cutune_vec_w0>(&y[" not in body
    # a null `codes` is never touched
    assert "&codes[" not in body and "codes[row * columns + c] = static_cast<unsigned short>(q);" in body
    # the per-column scale is valid for every column the loop runs over, whatever the row: packed
    assert "cutune_vec_load<cutune_vec_w0>(&scale[(0) + cutune_vec_p0 * cutune_vec_w0])" in body
    alone = (
        GUARDED.replace("* scale[c]", "").replace(" / scale[c]", "").replace("const float* __restrict__ scale, ", "")
    )
    assert "x[row * columns + c]: is accessed only where `(row >= rows)` holds" in _refusal(Vectorize(), alone)
    # a write under a condition on values (a mask), its memory valid wherever the loop runs, is still packed
    masked = GRID_STRIDE.replace("    y[i] = ", "    if (x[i] > 0) y[i] = ")
    assert "cutune_vec_store<cutune_vec_w0>(&y[" in Vectorize().apply(parse_source(masked), "k", None).body
    # an `if`'s condition runs on every iteration: a write under a test of the element itself is packed
    replaced = GRID_STRIDE.replace("    y[i] = ", "    if (y[i] == static_cast<T>(0)) y[i] = ")
    assert "cutune_vec_store<cutune_vec_w0>(&y[" in Vectorize().apply(parse_source(replaced), "k", None).body
    # a null pointer's elements are read only where it is not null
    optional = GRID_STRIDE.replace("float a, long n", "const T* __restrict__ w, float a, long n").replace(
        "static_cast<float>(y[i])", "(w ? static_cast<float>(w[i]) : 0.0f)"
    )
    body = Vectorize().apply(parse_source(optional), "k", None).body
    assert "&w[" not in body and "(w ? static_cast<float>(w[i]) : 0.0f)" in body


MOVED = """
__global__ void k(float* out, const float* in, float* total, int n) {
  const int lane = threadIdx.x % 32;
  float acc = 0.0f;
  const int first = blockIdx.x * n + threadIdx.x;
  in += first;
  out += first;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    out[i] = 2.0f * in[i];
    acc += in[i];
  }
  acc = lane == 0 ? acc : 0.0f;
  total[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
"""


def test_a_loop_reading_what_differs_between_threads_is_not_regrouped() -> None:
    # thread t reads in[first + i] = x[2t + k * blockDim.x]: regrouping i among threads would read other elements
    transform = Vectorize()
    assert "reads out, which differs between threads in its body" in _refusal(transform, MOVED)
    lane = MOVED.replace("  in += first;\n  out += first;\n", "").replace("2.0f * in[i]", "in[i] + lane")
    assert "reads lane, which differs between threads in its body" in _refusal(transform, lane)
    direct = lane.replace("in[i] + lane", "in[i] + threadIdx.x")
    assert "reads threadIdx.x in its body" in _refusal(transform, direct)
    # a total set from the lane after the loop, a loop's own name shadowing one that differs: each iteration is the same
    plain = lane.replace("in[i] + lane", "in[i] + 1.0f").replace("acc += in[i];", "const int lane = i; acc += lane;")
    assert transform.apply(parse_source(plain), "k", None).body


def test_packs_per_thread_keeps_each_threads_indices_so_what_differs_between_threads_may_be_read() -> None:
    # thread t still runs i = t, t + B, ... in that order (ITEMS at a time): it reads what it read before
    for source in (MOVED, MOVED.replace("2.0f * in[i]", "in[i] + lane"), MOVED.replace("2.0f * in[i]", "threadIdx.x")):
        variant = PacksPerThread().apply(parse_source(source), "k", None)
        # a thread index read outside the loop header: the block keeps its size, so no thread's indices change
        assert "ITEMS_BLOCK_DIV" not in {p.name for p in variant.params} and variant.launch is None


# a grid-stride loop moving its pointers in each iteration (one element per thread in the style of a helper macro):
# right only where a thread runs one iteration, as a grid covering n makes it
CARRIED = """
__global__ void k(float* out, const float* in, float* total, int n) {
  float acc = 0.0f;
  float best = -1.0f;
  int at = -1;
  float2 pair = make_float2(0.0f, 0.0f);
  float sums[2] = {0.0f, 0.0f};
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    in += i;
    out += i;
    out[0] = 2.0f * in[0];
  }
}
"""


@pytest.mark.parametrize(
    ("body", "carried"),
    [
        ("in += i;\n    out += i;\n    out[0] = 2.0f * in[0];", "in"),  # each iteration moves on from the last
        ("at = at + 1;\n    out[at] = in[i];", "at"),  # a count used as an address
        ("acc += in[i];\n    out[i] = acc;", "acc"),  # a running total read as more than a total
        ("if (in[i] > 0.0f) { best = in[i]; }\n    out[i] = best;", "best"),  # set on one path only
        ("acc += in[i] * in[i];", None),  # a running total, only updated
        ("acc = acc * 31.0f + in[i];", "acc"),  # a running value whose total depends on the order of the elements
        ("if (in[i] > best) { best = in[i]; at = i; }", None),  # a running maximum and where it lies
        ("best = in[i];\n    out[i] = best * 2.0f;", None),  # set whole before it is read: the iteration's own
        ("if (i % 2) { best = in[i]; } else { best = -in[i]; }\n    out[i] = best;", None),  # set on every path
        ("float c, s;\n    c = in[i];\n    s = c;\n    out[i] = s;", None),  # declared in the body, each of them
        # the kernel's local arrays and structs: a part of one written and read across iterations
        ("pair.x += in[i];\n    out[i] = pair.x;", "pair"),
        ("sums[i % 2] = fmaf(in[i], in[i], sums[i % 2]);", None),  # an array of running totals
        # a scratch array declared outside and filled each iteration element by element: the iteration's own
        ("sums[0] = in[i];\n    sums[1] = 2.0f * in[i];\n    out[i] = sums[0] + sums[1];", None),
        # filled by a loop: refused, the check proves no loop's fill whole
        ("for (int j = 0; j < 2; ++j) sums[j] = in[i] * j;\n    out[i] = sums[1];", "sums"),
        ("sums[0] = in[i];\n    out[i] = sums[1];", "sums"),  # one element left from the last iteration
    ],
)
def test_a_value_carried_from_one_iteration_to_the_next_keeps_the_iterations_with_their_thread(
    body: str, carried: str | None
) -> None:
    source = CARRIED.replace("in += i;\n    out += i;\n    out[0] = 2.0f * in[0];", body)
    for transform in (Vectorize(), GridShape()):
        if carried is None:
            assert transform.apply(parse_source(source), "k", None).body
        else:
            assert f"carries `{carried}` from one iteration to the next" in _refusal(transform, source)
    # packs_per_thread keeps each thread's iterations, in their order: what an iteration carries stays right
    assert PacksPerThread().apply(parse_source(source), "k", None).body


def test_a_running_value_combined_by_the_operator_of_the_kernels_block_reduction_may_be_regrouped() -> None:
    # cub's BlockReduce combines the threads' partials with `merge` in an order of its own: the partials may be
    # grouped otherwise too
    source = """
#include <cub/cub.cuh>
struct Merge {
  __device__ float2 operator()(float2 a, float2 b) const { return make_float2(fmaxf(a.x, b.x), a.y + b.y); }
};
__global__ void k(float2* out, const float2* in, int n) {
  Merge merge;
  float2 agg = make_float2(-1e30f, 0.0f);
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    agg = merge(agg, in[blockIdx.x * n + i]);
  }
  using Reduce = cub::BlockReduce<float2, 256>;
  __shared__ typename Reduce::TempStorage storage;
  const float2 total = Reduce(storage).Reduce(agg, REDUCE_OP);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}
"""
    for op, carried in (("merge", False), ("Merge{}", True)):
        reasons = [r.reason for r in propose_variants(parse_source(source.replace("REDUCE_OP", op)), "k", None)[1]]
        assert any("carries `agg`" in r for r in reasons) is carried, reasons


RANDOM = """
__global__ void k(const int n, float* y, unsigned long long seed) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned state;
  init_state(seed, idx, &state);  // a random state per thread, set through its address
  for (int j = idx; j < n; j += blockDim.x * gridDim.x) {
    y[j] = next_uniform(&state);  // the thread's k-th draw goes to its k-th element
  }
}
"""


def test_a_state_a_call_sets_from_the_thread_through_its_address_differs_between_threads() -> None:
    # regrouping the elements among threads (vectorize) would give each element another thread's draw
    assert "reads state, which differs between threads in its body" in _refusal(Vectorize(), RANDOM)
    packed = PacksPerThread().apply(parse_source(RANDOM), "k", None)  # each thread's draws stay in order
    # but fewer blocks would give each element another thread's draw too: no GRID_DIV, and no persistent grid
    assert {p.name for p in packed.params} == {"ITEMS"} and packed.launch is None
    assert "reads state, which differs between threads in its body" in _refusal(GridShape(), RANDOM)
    # set from nothing that differs between threads: every thread's state is the same, any thread may draw
    same = RANDOM.replace("init_state(seed, idx, &state)", "init_state(seed, 0, &state)")
    assert Vectorize().apply(parse_source(same), "k", None).body


def test_packs_per_thread_unrolls_stride_loops_and_refuses_cooperation() -> None:
    variant = PacksPerThread().apply(parse_source(GRID_STRIDE), "k", None)
    assert (
        "for (long cutune_i0 = (long)blockIdx.x * blockDim.x + threadIdx.x; cutune_i0 < n; "
        "cutune_i0 += (stride) * ITEMS)" in variant.body
    )
    assert "const long i = cutune_i0 + cutune_item0 * (stride);" in variant.body
    shared = (
        "__global__ void k(float* o, int n) {\n  __shared__ float s[32];\n"
        "  for (int i = threadIdx.x; i < n; i += blockDim.x) { s[0] = o[i]; __syncwarp(); }\n}"
    )
    assert "cooperate through __syncwarp (line 3)" in _refusal(PacksPerThread(), shared)


def test_grid_shape_makes_a_grid_stride_kernel_persistent_and_refuses_when_the_grid_means_something() -> None:
    variant = GridShape().apply(parse_source(GRID_STRIDE), "k", None)
    assert variant.launch is not None and "sm_count" in variant.launch.grid[0]
    per_row = (
        "__global__ void k(float* o, int d) {\n"
        "  for (int i = threadIdx.x; i < d; i += blockDim.x) o[blockIdx.x * d + i] = 0;\n}"
    )
    assert "the block index is the work item" in _refusal(GridShape(), per_row)
    mixed = GRID_STRIDE.replace("y[i] = ", "if (blockIdx.x == 0) y[0] = 0; y[i] = ")
    assert "blockIdx.x is read outside the grid-stride loop headers" in _refusal(GridShape(), mixed)
    # and the variants that could launch fewer blocks do not
    for variant in (
        Vectorize().apply(parse_source(mixed), "k", None),
        PacksPerThread().apply(parse_source(mixed), "k", None),
    ):
        assert not any(p.name.endswith("GRID_DIV") for p in variant.params) and variant.launch is None


SWITCHED = """
__global__ void k(float* y, const float* x, int op, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  switch (op) {
    case 0: v = -v; break;
    default: break;
  }
  for (int j = 0; j < 4; ++j) {
    if (v > 8.0f) break;
    v *= 2.0f;
  }
  y[i] = v;
}
"""


def test_a_break_that_leaves_a_nested_switch_or_loop_does_not_leave_the_stride_loop() -> None:
    # the one-element guard is a grid-stride loop now; its body's breaks end the switch and the inner loop only
    variants, _ = propose_variants(parse_source(SWITCHED), "k", None, transforms=ELEMENTWISE)
    assert [v.name for v in variants] == ["vectorized", "packs_per_thread", "persistent_grid"]
    assert {"BLOCK_DIV", "GRID_DIV"} <= {p.name for p in variants[0].params}
    leaving = GRID_STRIDE.replace("y[i] = ", "switch (n) { default: break; }\n    if (x[i] < 0) break;\n    y[i] = ")
    assert "the loop at line 5 leaves the loop early (line 7)" in _refusal(Vectorize(), leaving)


@pytest.mark.nvcc
@needs_nvrtc
def test_a_grid_stride_kernel_with_all_its_variants_compiles(tmp_path: Path) -> None:
    model = parse_source(GRID_STRIDE)
    spec = load_spec(SAMPLES / "gated_activation.tune.toml").kernel("act_and_mul_kernel")
    spec = type(spec)(**{**spec.__dict__, "kernel": "k", "template_args": {"T": "float"}, "space": None})
    variants, refusals = propose_variants(model, "k", spec, transforms=ELEMENTWISE)
    assert [v.name for v in variants] == ["vectorized", "packs_per_thread", "persistent_grid"] and not refusals
    template, combined = with_variants(model, "k", variants, spec)
    assert combined is not None
    configs = [{"VARIANT": 0}, {"VARIANT": 1, "PACKS": 2}, {"VARIANT": 2, "ITEMS": 4}, {"VARIANT": 3}]
    expressions = name_expressions(template, combined, configs)
    entries, lowered = compile_both(template, expressions, tmp_path)
    assert len(set(entries)) == 4 and set(lowered) == set(expressions)


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.cu")), ids=lambda p: p.name)
def test_every_transform_applies_or_refuses_on_every_sample_kernel(path: Path) -> None:
    model = parse_source(path.read_text(), str(path))
    for kernel in model.kernels:
        variants, refusals = propose_variants(model, kernel.name, None)
        steps = {
            r.recipe for r in refusals if r.recipe.startswith("canonical ")
        }  # a canonical step's, not a transform's
        tried = {v.provenance.origin for v in variants} | {r.recipe for r in refusals} - steps
        assert tried == set(TRANSFORMS)  # each applied (alone or chained) or refused
        assert all(r.reason for r in refusals)
        with_variants(model, kernel.name, variants, None)  # the combination is always well-formed
