"""row_cache: a row read in several counted passes read once and kept in registers; the rewrite's text, its chaining
under online_merge, its refusals (a write that may reach the row among them), nvcc and NVRTC builds, and on the GPU
every configuration equal to the original while a planted read of the wrong round is rejected."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.limits import limits_for
from cutune.project import open_kernel
from cutune.template.variants import VARIANT, RowCache, combine_all
from cutune.template.variants.row_cache import ROUNDS
from cutune.tune.search import variant_seeds
from cutune.tune.space import Feasibility
from tests.cuda.test_extract import needs_nvrtc

from .compile import assert_compiles, measured_failures, variant_alone

FILE = Path(__file__).resolve().parents[2] / "data/template/variants/row_cache.cu"
SAMPLE = Path(__file__).resolve().parents[3] / "samples/online_softmax.cu"
KERNELS = ["three_pass_softmax_kernel", "l2_normalize_kernel", "prefix_mass_kernel"]
PASSES = """
__global__ void k(float* y, const float* x, float* z, int n) {{
  const int rounds = (n + 127) / 128;
  float s = 0.f;
  for (int r = 0; r < rounds; ++r) {{
    const int c = r * 128 + threadIdx.x;
    {first}
  }}
  {between}
  for (int r = 0; r < rounds; ++r) {{
    const int c = r * 128 + threadIdx.x;
    {later}
  }}
}}
"""
FIRST = "if (c < n) { const float v = x[c]; s += v; }"
LATER = "if (c < n) { const float v = x[c]; y[c] = v * s; }"


def _refusal(first: str = FIRST, later: str = LATER, between: str = "") -> str:
    source = PASSES.format(first=first, later=later, between=between)
    with pytest.raises(TransformRefused) as caught:
        RowCache().apply(parse_source(source), "k", None)
    return caught.value.reason


def test_the_first_pass_keeps_its_loads_and_the_later_ones_read_them() -> None:
    ctx = open_kernel(FILE, "three_pass_softmax_kernel")
    variant = RowCache().apply(ctx.template_model, "three_pass_softmax_kernel", ctx.require_spec())
    flat = " ".join(variant.body.split())
    assert f"Pack4 cutune_rc0[{ROUNDS} > 0 ? {ROUNDS} : 1];" in flat
    # the pass as written behind the count, each unrolled round under the original's bound
    guard = f"if ({ROUNDS} > 0 && (ceil_div(cols, 4 * kThreads)) <= {ROUNDS}) {{ #pragma unroll"
    assert flat.count(guard) == 3 and flat.count(f"for (int r = 0; r < {ROUNDS}; ++r) {{") == 4
    assert flat.count("if (r < (ceil_div(cols, 4 * kThreads))) {") == 4
    # every round's load first, under its `if`, then each pass reads the round's registers where it loaded
    fetch = "const int at = (r * kThreads + threadIdx.x) * 4; if (at < cols) cutune_rc0[r].load(x + at); } }"
    assert f"if (r < (ceil_div(cols, 4 * kThreads))) {{ {fetch}" in flat
    assert flat.count("v = cutune_rc0[r];") == 3 and flat.count("v.load(x + at);") == 3
    assert [(p.name, p.values, p.default) for p in variant.params] == [(ROUNDS, (0, 1, 2, 4, 8, 16, 32), 0)]
    assert "2 later pass(es)" in variant.provenance.note and "only in place" in variant.provenance.note


def test_a_first_pass_that_stops_early_fetches_what_a_whole_later_pass_reads() -> None:
    # a sampler's stop: the fetches read each round the second pass reads anyway, under the same condition
    ctx = open_kernel(FILE, "prefix_mass_kernel")
    flat = " ".join(RowCache().apply(ctx.template_model, "prefix_mass_kernel", ctx.require_spec()).body.split())
    assert "if (c < cols) cutune_rc0[r] = x[c];" in flat and "if (c < cols) v = cutune_rc0[r];" in flat
    assert "const float v = cutune_rc0[r];" in flat and "if (total > mass) break;" in flat


def test_a_lambdas_return_does_not_leave_the_pass() -> None:
    first = (
        "if (c < n) { const float v = x[c]; s += v; } auto keep = [&](float t) { return t > s; }; if (keep(1.f)) break;"
    )
    flat = " ".join(
        RowCache().apply(parse_source(PASSES.format(first=first, later=LATER, between="")), "k", None).body.split()
    )
    assert "if (c < n) cutune_rc0[r] = x[c];" in flat


def test_a_read_in_an_expression_is_kept_by_assigning_it() -> None:
    ctx = open_kernel(SAMPLE, "online_softmax_kernel")
    variant = RowCache().apply(ctx.template_model, "online_softmax_kernel", ctx.require_spec())
    flat = " ".join(variant.body.split())
    assert "float4 cutune_rc0[" in flat
    assert "if (at < vocab) cutune_rc0[r] = *reinterpret_cast<const float4*>(x + at);" in flat
    assert "if (at < vocab) v = cutune_rc0[r];" in flat and "const float4 v = cutune_rc0[r];" in flat


def test_it_chains_under_the_online_merge_beside_both_plain_variants() -> None:
    ctx = open_kernel(SAMPLE, "online_softmax_kernel")
    combined = combine_all(ctx.template_model, "online_softmax_kernel", ctx.template, ctx.spec)
    names = [v.name for v in combined.variants]
    assert names == ["online_merge_row_cache", "online_merge", "row_cache"]
    chained = " ".join(combined.variants[0].body.split())
    assert "__syncthreads_or(" in chained and "cutune_rc0[r] = *reinterpret_cast" in chained


def test_the_search_measures_each_cached_variant_first_at_four_rounds_not_at_the_original() -> None:
    ctx = open_kernel(SAMPLE, "online_softmax_kernel")
    combined = combine_all(ctx.template_model, "online_softmax_kernel", ctx.template, ctx.spec)
    space = combined.template.space
    assert combined.spec is not None and space.param(ROUNDS).try_first == 4
    seeds = variant_seeds(Feasibility(space, combined.spec, limits_for("sm_90")))
    # online_merge_row_cache, online_merge, row_cache: the first seeds, one each
    assert [(c[VARIANT], c[ROUNDS]) for c in seeds[:3]] == [(1, 4), (2, 0), (3, 4)]


@pytest.mark.parametrize(
    ("first", "later", "between", "reason"),
    [
        # a store through the row's own pointer at another element, or through a pointer that may meet it
        (FIRST, "if (c < n) { const float v = x[c]; y[c + 1] = v; }", "", "stores through `y` away from the load's"),
        (FIRST, LATER, "z[0] = s;", "stores through `z` away from the load's element"),
        (FIRST, LATER, "store_row(z, s);", "passes `z` to store_row"),
        (FIRST, LATER, "atomicAdd(&s, 1.f);", "atomic update"),
        # the first pass stopping early, and no later pass reading every round the fetches would: they would read
        # what the kernel never reads (here past the row's end)
        ("if (c >= n) break; const float v = x[c]; s += v;", LATER, "", "leaves its loop early (line 7), and no later"),
        ("if (c >= n) return; const float v = x[c]; s += v;", LATER, "", "leaves the kernel (line 7): the later"),
        # a return after the load: the same conditions as the later pass's, but it may never run
        ("if (c < n) { const float v = x[c]; s += v; } if (s > 1.f) return;", LATER, "", "may never run"),
        ("if (c < n) { const float v = x[c]; s += v; } if (s > 1.f) break;", LATER, "return;", "and no later pass"),
        (
            "if (c < n) { const float v = x[c]; s += v; } if (s > 1.f) break;",
            "if (c < n) { const float v = x[c]; y[c] = v; if (v > 2.f) break; }",
            "",
            "and no later pass reads every round",
        ),
        # a pass that moves its own round
        (FIRST, "if (c < n) { const float v = x[c]; y[c] = v; r += 1; }", "", "the round `r` is assigned"),
        # the later load running where the first did not, or at another place
        ("if (c < n - 1) { const float v = x[c]; s += v; }", LATER, "", "under other conditions"),
        (FIRST, LATER, "n = 2 * n;", "reads `n`, which the kernel assigns"),
        (
            FIRST,
            "{ const int c = r * 128 + threadIdx.x + 1; if (c < n) { const float v = x[c]; y[c] = v; } }",
            "",
            "reads `c`, declared more than once in its pass",
        ),
        ("const float v = x[threadIdx.x]; s += v;", "const float v = x[threadIdx.x]; y[c] = v;", "", "same place"),
    ],
)
def test_passes_whose_rows_may_change_or_differ_are_refused(first: str, later: str, between: str, reason: str) -> None:
    assert reason in _refusal(first, later, between)


def test_the_later_pass_with_its_own_round_constant_is_refused() -> None:
    source = PASSES.format(first=FIRST, later=LATER, between="").replace(
        "const int c = r * 128 + threadIdx.x;\n    if (c < n) { const float v = x[c]; y",
        "const int c = r * 128;\n    if (c < n) { const float v = x[c]; y",
    )
    with pytest.raises(TransformRefused) as caught:
        RowCache().apply(parse_source(source), "k", None)
    assert "`c` differs between lines" in caught.value.reason


@pytest.mark.nvcc
@needs_nvrtc
@pytest.mark.parametrize("kernel", KERNELS)
def test_the_cached_passes_compile_with_nvcc_and_nvrtc(kernel: str, tmp_path: Path) -> None:
    ctx = open_kernel(FILE, kernel)
    combined = combine_all(ctx.template_model, kernel, ctx.template, ctx.spec)
    assert combined.spec is not None and [v.name for v in combined.variants][-1] == "row_cache"
    default = combined.template.space.default()
    k = len(combined.variants)
    configs = [{**default, "VARIANT": k, ROUNDS: rounds} for rounds in (0, 1, 8, 32)]
    assert_compiles(combined.template, [combined.spec], configs, tmp_path, FILE)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_every_configuration_equals_the_original_on_the_gpu(kernel: str) -> None:
    ctx = open_kernel(FILE, kernel)
    spec = ctx.require_spec()
    variant = RowCache().apply(ctx.template_model, kernel, spec)
    passed, failed = measured_failures(variant_alone(ctx, kernel, variant), spec, {"VARIANT", ROUNDS})
    assert passed >= 7 and not failed, failed


@pytest.mark.gpu
def test_a_later_pass_reading_another_round_is_caught_on_the_gpu() -> None:
    # planted wrong: the normalising pass reads the registers of the round before (the first round its own)
    ctx = open_kernel(FILE, "three_pass_softmax_kernel")
    spec = ctx.require_spec()
    variant = RowCache().apply(ctx.template_model, "three_pass_softmax_kernel", spec)
    last = variant.body.rindex("v = cutune_rc0[r];")
    body = variant.body[:last] + "v = cutune_rc0[r > 0 ? r - 1 : 0];" + variant.body[last + len("v = cutune_rc0[r];") :]
    wrong = dataclasses.replace(variant, body=body)
    passed, failed = measured_failures(
        variant_alone(ctx, "three_pass_softmax_kernel", wrong), spec, {"VARIANT", ROUNDS}
    )
    # only where a size's rounds are cached and more than one: 9 rounds at 16 and 32
    assert failed and all(f"'{ROUNDS}': 16" in f or f"'{ROUNDS}': 32" in f for f in failed), (passed, failed)
