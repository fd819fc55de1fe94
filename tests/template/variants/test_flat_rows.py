"""flat_rows: a grid-stride loop over a flat index that its body splits by division, walked by rows with the
divisions once a row. Checked by what it hoists and refuses, on llama.cpp's k_set_rows, and equal to the original
on the host (warp_emulator.h) at several row widths and grids: ragged ends, 32-bit indices, negative numerators
(the row's check sends it to the per-element body) and a row length that is not positive (the original loop)."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from benchmarks.corpus_variants import TABLE, opened

from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.gpu.backend import TimingOptions
from cutune.gpu.registry import create_backend
from cutune.project import build_job
from cutune.template.model import Config
from cutune.template.variants import TRANSFORMS, VARIANT, FlatRows, combine_all, propose_variants
from cutune.template.variants.flat_rows import BLOCKS_PER_SM, FLAT_VEC, ITEMS, ROW_THREADS, SPLIT
from tests.corpus.sources import LLAMA, corpus_dir

EMULATOR = Path(__file__).resolve().parents[2] / "data" / "template" / "variants" / "warp_emulator.h"
SET_ROWS = corpus_dir() / LLAMA / "vendor" / "llama.cpp" / "ggml" / "src" / "ggml-cuda" / "set-rows.cu"

# a gather of rows into a 4-D output: coordinates by a chain of divisions, a row index loaded from a read-only array
GATHER = """
__global__ void gather(const float* __restrict__ src, const int64_t* __restrict__ idx, float* __restrict__ dst,
                       const int64_t n0, const int64_t n1, const int64_t n2, const int64_t n3) {
  const int64_t i = (int64_t)blockDim.x * blockIdx.x + threadIdx.x;
  if (i >= n0 * n1 * n2 * n3) return;
  const int64_t c3 = i / (n0 * n1 * n2);
  const int64_t c2 = (i - c3 * n0 * n1 * n2) / (n0 * n1);
  const int64_t c1 = (i - c3 * n0 * n1 * n2  // a comment inside the declaration
                      - c2 * n0 * n1) / n0;
  const int64_t c0 = i - c3 * n0 * n1 * n2 - c2 * n0 * n1 - c1 * n0;
  const int64_t r = idx[c1];
  dst[((c3 * n2 + c2) * n1 + r) * n0 + c0] = 2.0f * src[i] + (float)c3;
}
"""
# numerators that go negative for the first rows (C's division truncates towards zero: no row-invariant quotient
# there), and a divisor that may not be positive
LAGGED = """
__global__ void lagged(float* __restrict__ out, const float* __restrict__ x, const int64_t n, const int64_t d,
                       const int64_t lag) {
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const int64_t shifted = i - lag * d;
    const int64_t q = shifted / d;
    const int64_t r = shifted % d;
    out[i] = x[i] + (float)q * 1000.f + (float)r;
  }
}
"""
# a gather by row and column (`(i / d) * ld + i % d`: the column added to a row-invariant offset), beside a
# quotient of the index shifted by a non-multiple of the row, which must stay with the element
GATED = """
__global__ void gated(float* __restrict__ out, const float* __restrict__ x, const int64_t n, const int64_t d,
                      const int64_t ld) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t at = (i / d) * ld + i % d;
  const int64_t gate = ld == d ? at : at + d;
  const int64_t later = (i + 3) / d;
  out[i] = x[at] * x[gate] + (float)later;
}
"""
# 32-bit indices, a per-row scale loaded once a row, a bound that ends inside a row
BROADCAST = """
__global__ void broadcast(float* __restrict__ out, const float* __restrict__ x, const float* __restrict__ scale,
                          const float* __restrict__ bias, const int n, const int d) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const int row = i / d;
    const int col = i % d;
    const float s = scale[row];
    out[i] = x[i] * s + bias[col];
  }
}
"""
# an update in place: the row's pack of `y` is read, then written back
IN_PLACE = """
__global__ void in_place(float* __restrict__ y, const float* __restrict__ x, const int64_t n, const int64_t d) {
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const int64_t r = i / d;
    y[i] = y[i] * 2.f + x[i % d] + (float)r;
  }
}
"""
# a row length held in a local of the body (llama.cpp's pool2d `O_HW = oh * ow`): computed before the loop, where
# the local is not declared, it is written as its value
PLANES = """
__global__ void planes(float* __restrict__ out, const float* __restrict__ x, const float* __restrict__ scale,
                       const int n, const int h, const int w) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const int hw = h * w;
    const int c = i / hw;
    out[i] = x[i] * scale[c] + (float)(i % hw / w);
  }
}
"""
# divisions inside expressions (DeepSpeed's `bias[i % hidden]`): a per-row scale loaded once a row, the bias's column
# added to the row's remainder; one in a branch of `?:` (not every element evaluates it) and one of a value the body
# changes stay with the element
INLINE = """
__global__ void inline_div(float* __restrict__ out, const float* __restrict__ x, const float* __restrict__ scale,
                           const float* __restrict__ bias, const int64_t n, const int64_t d) {
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    int64_t k = i;
    k += 1;
    const float v = x[i] * scale[i / d];
    out[i] = v + bias[i % d] + (d > 8 ? bias[(i + d) % d] : 0.f) + x[k % d];
  }
}
"""


def test_registered_after_the_others_so_they_keep_their_numbers() -> None:
    # thread_packs came after it
    assert list(TRANSFORMS)[-3:-1] == ["flat_rows", "thread_packs"] and isinstance(TRANSFORMS["flat_rows"], FlatRows)


def _variant(source: str, kernel: str):  # type: ignore[no-untyped-def]
    variants, refusals = propose_variants(parse_source(source), kernel, None)
    found = [v for v in variants if v.name == "flat_rows"]
    assert found, [r for r in refusals if r.recipe == "flat_rows"]
    return found[0]


def _refusal(source: str, kernel: str) -> str:
    with pytest.raises(TransformRefused) as caught:
        FlatRows().apply(parse_source(source), kernel, None)
    return caught.value.reason


def test_the_division_chain_is_computed_once_a_row_and_the_loaded_row_index_with_it() -> None:
    v = _variant(GATHER, "gather")
    assert "rows of n0, 3 division(s) a row" in v.provenance.note
    fast = v.body.split("} else {")[0]
    per_element = fast[fast.index("const int64_t i = cutune_base0 + cutune_col0;") :]
    assert "/" not in per_element  # no division left for the element
    assert "const int64_t c0 = cutune_r0_c0 + cutune_col0;" in per_element
    assert "const int64_t r = cutune_r0_r;" in per_element  # the read-only load, once a row
    assert "const int64_t cutune_r0_r = idx[cutune_r0_c1];" in v.body


def test_a_row_length_held_in_a_local_of_the_body_is_written_as_its_value_before_the_loop() -> None:
    v = _variant(PLANES, "planes")
    assert "const long long cutune_d0 = ((h*w));" in v.body  # `hw` is declared inside the loop only
    assert "const int cutune_r0_hw = h * w;" in v.body


def test_the_column_is_added_to_a_row_offset_and_a_shifted_index_is_divided_per_element() -> None:
    v = _variant(GATED, "gated")
    fast = v.body.split("} else {")[0]
    assert "const int64_t at = cutune_r0_at + cutune_col0;" in fast
    assert "const int64_t gate = cutune_r0_gate + cutune_col0;" in fast
    assert "const int64_t later = (i + 3) / d;" in fast  # (b + 3 + c) / d changes inside the row


def test_divisions_inside_expressions_are_taken_out_of_the_elements_unless_in_a_branch() -> None:
    v = _variant(INLINE, "inline_div")
    assert "rows of d, 2 division(s) a row" in v.provenance.note
    assert "const auto cutune_e0_2_0 = scale[cutune_at0 / d];" in v.body  # the row's scale, loaded once
    assert "const auto cutune_e0_3_0 = cutune_at0 % d;" in v.body
    fast = v.body.split("} else {")[0]
    assert "const float v = x[i] * cutune_e0_2_0;" in fast
    column = "bias[((decltype(cutune_e0_3_0))(cutune_e0_3_0 + cutune_col0))]"  # the element's own type
    assert f"out[i] = v + {column} + (d > 8 ? bias[(i + d) % d] : 0.f) + x[k % d];" in fast


def test_where_the_element_may_use_the_loaded_object_only_its_index_is_taken_out() -> None:
    # its address taken, bound to a reference, passed to a function that may take it by reference: a row's copy
    # would stand in for the array element; min takes its arguments by value
    source = (
        "__device__ float peek(const float& v);\n"
        "__global__ void k(float* __restrict__ out, const float* __restrict__ s, const int64_t n, const int64_t d) {"
        "for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) "
        "{ const float* p = &s[i / d]; const float& r = s[i / d]; out[i] = *p + r + peek(s[i / d]) + min(s[i / d], "
        "1.f); } }"
    )
    fast = _variant(source, "k").body.split("} else {")[0]
    assert "const float* p = &s[cutune_e0_0_0];" in fast
    assert "const float& r = s[cutune_e0_1_0];" in fast
    assert "peek(s[cutune_e0_2_0]) + cutune_e0_2_1;" in fast  # the whole min (of values) once a row


def test_a_narrowed_remainder_is_computed_once_a_row_and_narrowed_per_element() -> None:
    source = (
        "__global__ void k(float* __restrict__ out, const float* __restrict__ x, const int64_t n, const int64_t d) {"
        "for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) "
        "{ const int c = i % d; out[i] = x[c]; } }"
    )
    fast = _variant(source, "k").body.split("} else {")[0]
    assert "const int c = ((decltype(cutune_e0_0_0))(cutune_e0_0_0 + cutune_col0));" in fast  # the exact remainder


def test_nothing_after_a_continue_is_evaluated_once_a_row() -> None:
    # a padding row (slot < 0) skips the load the original would never make for it
    source = """
__global__ void k(float* __restrict__ out, const float* __restrict__ table, const int64_t* __restrict__ slots,
                  const int64_t n, const int64_t d) {
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const int64_t row = i / d;
    const int64_t slot = slots[row];
    if (slot < 0) continue;
    const float scale = table[slot];
    out[i] = scale * (float)(i % d);
  }
}
"""
    v = _variant(source, "k")
    fast = v.body.split("} else {")[0]
    assert "const int64_t cutune_r0_slot = slots[cutune_r0_row];" in v.body  # before the continue: every element
    assert "cutune_r0_scale" not in v.body and "const float scale = table[slot];" in fast


def test_a_value_the_body_may_change_stays_with_the_element() -> None:
    # `c` changes after its declaration, `d` goes by reference to a helper, `e` by value to another
    source = """
__device__ void bump(int64_t& v) { v += 1; }
__device__ int64_t wrap(const int64_t v, const int64_t n) { return v < 0 ? v + n : v; }
__global__ void k(float* __restrict__ out, const float* __restrict__ x, const int64_t n, int64_t d, const int64_t e) {
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    int64_t c = i % e;
    c += 1;
    const int64_t r = i / e;
    const int64_t q = c / e;
    const int64_t w = wrap(r, e);
    bump(d);
    out[i] = x[q] + (float)w;
  }
}
"""
    v = _variant(source, "k")
    assert "rows of e" in v.provenance.note
    fast = v.body.split("} else {")[0]
    # `c` per element, initialised from the row's remainder plus the column; its quotient per element
    assert "int64_t c = ((decltype(cutune_e0_0_0))(cutune_e0_0_0 + cutune_col0));" in fast
    assert "const int64_t q = c / e;" in fast
    assert "const int64_t r = cutune_r0_r;" in fast  # e goes to wrap by value: still the row's
    with pytest.raises(TransformRefused):  # d goes by reference: no row of d
        FlatRows().apply(
            parse_source(source.replace("i % e", "i % d").replace("c / e", "c / d").replace("i / e", "i / d")),
            "k",
            None,
        )


def test_the_rows_check_their_numerators_and_divisors_before_the_hoisted_values_are_used() -> None:
    v = _variant(LAGGED, "lagged")
    assert "if ((cutune_r0_shifted) >= 0 && (d) > 0) {" in v.body
    assert "if (cutune_d0 > 0)" in v.body  # else the original loop


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            "for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) "
            "out[i] = x[i / d];",
            "has a `size_t` index",
        ),
        (
            "float acc = 0.f; for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) "
            "{ const int r = i / d; acc += x[r]; } out[0] = acc;",
            "assigns acc, declared outside it",
        ),
        (
            "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) "
            "out[i] = x[i] * 2.f;",
            "divides no value of its index",
        ),
        # an unsigned divisor (hex literals included) makes the arithmetic unsigned: not proven
        (
            "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) "
            "{ const int r = i / 0x10u; out[i] = x[r]; }",
            "divides no value of its index",
        ),
        # the index narrowed from 64 to 32 bits before its division: not the same row arithmetic
        (
            "for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) "
            "{ const int c = (int)i % d; out[i] = x[c]; }",
            "divides no value of its index",
        ),
        (
            "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) "
            "{ const int r = i / d; out[i] = x[r] + (float)threadIdx.x; }",
            "reads threadIdx.x in its body",
        ),
    ],
)
def test_it_refuses_naming_why(body: str, reason: str) -> None:
    source = (
        "__global__ void k(float* __restrict__ out, const float* __restrict__ x, const int n, const int d, "
        f"const int64_t d64) {{ {body} }}"
    )
    assert reason in _refusal(source, "k")


def test_it_applies_to_llama_cpps_set_rows_from_its_file() -> None:
    if not SET_ROWS.is_file():
        pytest.skip("the llama.cpp corpus is not unpacked (scripts/corpus.sh)")
    v = _variant(SET_ROWS.read_text(), "k_set_rows")
    assert "rows of ne00, 3 division(s) a row" in v.provenance.note
    assert "const int64_t dst_row = cutune_r0_dst_row;" in v.body


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["k_set_rows", "unary_gated_op_kernel"])
def test_the_corpus_kernels_equal_the_original_on_the_gpu_at_every_row_width(kernel: str) -> None:
    entry = next(e for e in TABLE if e.kernel == kernel)
    try:
        ctx = opened(entry)
    except FileNotFoundError as e:
        pytest.skip(str(e))
    combined = combine_all(ctx.template_model, kernel, ctx.template, ctx.spec)
    k = 1 + [v.name for v in combined.variants].index("flat_rows")
    ctx = dataclasses.replace(ctx, template=combined.template, template_model=combined.model, spec=combined.spec)
    backend = create_backend("cupy")
    backend.open(build_job(ctx, timing=TimingOptions(warmup=1, reps=3, min_time_ms=0.0)))
    default = ctx.space.default()
    assert FLAT_VEC in default
    try:  # every size of its spec, each checked against the original's output
        cases = ((32, 1, 1, 1, 1), (128, 4, 4, 8, 4), (256, 8, 1, 2, 1), (1024, 2, 16, 32, 2), (64, 2, 1, 8, 8))
        for rt, items, split, blocks, vec in cases:
            values = {ROW_THREADS: rt, ITEMS: items, SPLIT: split, BLOCKS_PER_SM: blocks}
            values[FLAT_VEC] = vec
            config = Config.of({**default, VARIANT: k, **values})
            measured = backend.evaluate(config)
            assert measured.ok, f"{dict(config)}: {measured.failure} {measured.detail}"
    finally:
        backend.close()


HARNESS = """
#include <random>
template <class F>
std::vector<float> run(F kernel, unsigned grid, size_t outputs) {
  std::vector<float> out(outputs, -1.f);
  launch(grid, 64, [&] { kernel(out.data()); });
  return out;
}
int main() {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<float> a(4096), b(4096), c(4096);
  for (auto* v : {&a, &b, &c}) for (auto& e : *v) e = uniform(rng);
  std::vector<int64_t> idx(24);  // a permutation of the 24 rows of the gather
  for (size_t k = 0; k < idx.size(); ++k) idx[k] = (k * 7) % idx.size();
%CASES%
}
"""


def _case(label: str, call: str, blocks: int, outputs: int, grids: tuple[int, ...] = (1, 3, 7)) -> str:
    """Prints `label RT VEC grid equal|different` for the variant at each row width (with 1, 4, 8 columns a thread
    at once, each row in 1, 3, 16 parts: more than some rows have columns; 1, 2, 4, 8 columns a pack: the rows whose
    part is not aligned run unpacked, a part's last chunk may be partial) and grid against the original."""
    lines = [f"  {{ const auto original = run([&](float* o) {{ {call.format(k='original')}; }}, {blocks}, {outputs});"]
    for rt, items, split, vec in ((32, 1, 1, 1), (64, 4, 3, 2), (128, 8, 16, 4), (64, 2, 1, 4), (32, 1, 2, 8)):
        for grid in grids:
            variant = call.format(k=f"variant<{rt}, {items}, {split}, {vec}>")
            lines.append(
                f'    std::printf("{label} {rt} {vec} {grid} %s\\n", run([&](float* o) {{ {variant}; }}, {grid}, '
                f'{outputs}) == original ? "equal" : "different");'
            )
    return "\n".join([*lines, "  }"])


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
def test_every_row_width_and_grid_equals_the_original_on_the_host(tmp_path: Path) -> None:
    units = []
    kernels = (
        (GATHER, "gather"),
        (LAGGED, "lagged"),
        (GATED, "gated"),
        (BROADCAST, "broadcast"),
        (INLINE, "inline_div"),
        (IN_PLACE, "in_place"),
        (PLANES, "planes"),
    )
    for source, kernel in kernels:
        v = _variant(source, kernel)
        params = re.search(rf"{kernel}\((.*?)\) {{", source, re.S)
        assert params is not None
        renamed = source.replace(f"void {kernel}(", f"void {kernel}_original(")
        head = "template <int FLAT_ROW_THREADS, int FLAT_ITEMS, int FLAT_SPLIT, int FLAT_VEC>\n"
        head += f"__global__ void {kernel}_variant({params.group(1)})"
        assert FLAT_VEC in {p.name for p in v.params} and v.helpers  # every one has accesses that move with the column
        variant = f"{head} {{{v.body}}}"
        units.append(f"{renamed}\n{variant}\n")
    cases = [
        # 5 x 3 x 24 x 2 elements in rows of 5 (ragged against the 64-thread rows and blocks)
        _case("gather", "gather_{k}(a.data(), idx.data(), o, 5, 24, 3, 2)", 12, 720),
        _case("lagged", "lagged_{k}(o, a.data(), 1000, 37, 3)", 16, 1000),  # the first three rows run per element
        _case("lagged-negative-d", "lagged_{k}(o, a.data(), 300, -4, 2)", 5, 300),  # the original loop
        _case("gated", "gated_{k}(o, a.data(), 1000, 50, 64)", 16, 1000),
        _case("gated-same", "gated_{k}(o, a.data(), 1000, 50, 50)", 16, 1000),
        _case("broadcast", "broadcast_{k}(o, a.data(), b.data(), c.data(), 1000, 96)", 16, 1000),  # ends mid-row
        _case("broadcast-wide", "broadcast_{k}(o, a.data(), b.data(), c.data(), 4000, 1000)", 63, 4000),
        _case("inline", "inline_div_{k}(o, a.data(), b.data(), c.data(), 1000, 96)", 16, 1000),
        _case("inline-narrow", "inline_div_{k}(o, a.data(), b.data(), c.data(), 1000, 5)", 16, 1000),
        _case("inline-negative-d", "inline_div_{k}(o, a.data(), b.data(), c.data(), 300, -7)", 5, 300),
        _case("in-place", "in_place_{k}(o, a.data(), 1000, 96)", 16, 1000),
        _case("planes", "planes_{k}(o, a.data(), b.data(), 1000, 6, 8)", 16, 1000),  # rows of 48 = h * w
    ]
    main = HARNESS.replace("%CASES%", "\n".join(cases))
    helpers = v.helpers  # the pack helpers, the same for every variant
    (tmp_path / "emulated.cpp").write_text(
        f'#include "{EMULATOR}"\n#include <cstdio>\n{helpers}\n' + "\n".join(units) + main
    )
    build = ["g++", "-std=c++20", "-O1", "-pthread", "-w", str(tmp_path / "emulated.cpp"), "-o", str(tmp_path / "e")]
    done = subprocess.run(build, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    ran = subprocess.run([str(tmp_path / "e")], capture_output=True, text=True, timeout=120, check=True)
    lines = [line for line in ran.stdout.split("\n") if line]
    assert len(lines) == len(cases) * 15 and all(line.endswith(" equal") for line in lines), ran.stdout
