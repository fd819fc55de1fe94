"""Pair accumulators split into scalar parts: the declaration, the parts, the whole-pair moves (reduction helper,
shared arrays of pairs, a choice with a literal pair), and None where the pair is used whole otherwise."""

from __future__ import annotations

from cutune.cuda.parse import parse_source
from cutune.template.recipes.base import KernelSource
from cutune.template.variants.compound import split_compound_accumulators

KERNEL = """
__global__ void k(float* out, const float* x, int n) {{
  {shared}
  double2 acc = {{0.0, 1.0}};
  for (int i = threadIdx.x; i < n; i += blockDim.x) {{ acc.x += x[i]; acc.y *= x[i]; }}
  {moves}
  out[blockIdx.x] = acc.x / acc.y;
}}
"""


def _split(moves: str, shared: str = "") -> str | None:
    model = parse_source(KERNEL.format(moves=moves, shared=shared))
    return split_compound_accumulators(KernelSource(model, model.kernel("k")))


def test_the_pair_becomes_two_scalars_and_each_whole_move_is_written_per_part() -> None:
    text = _split(
        "acc = reduce(acc); if (threadIdx.x == 0) s[0] = acc; acc = n > 1 ? s[0] : make_double2(2.0, 3.0);",
        shared="__shared__ double2 s[4];",
    )
    assert text is not None
    assert "double acc_x = 0.0, acc_y = 1.0;" in text
    assert "acc_x += x[i]; acc_y *= x[i];" in text
    assert "{ acc_x = reduce(acc_x); acc_y = reduce(acc_y); }" in text
    assert "if (threadIdx.x == 0) { s_x[0] = acc_x; s_y[0] = acc_y; }" in text
    assert "{ acc_x = n > 1 ? s_x[0] : (2.0); acc_y = n > 1 ? s_y[0] : (3.0); }" in text
    assert "__shared__ double s_x[4]; __shared__ double s_y[4];" in text
    assert "out[blockIdx.x] = acc_x / acc_y;" in text
    parse_source(text)  # and it still parses


def test_a_pair_used_whole_any_other_way_is_left_alone() -> None:
    assert _split("acc = combine(acc, acc);") is None
    assert _split("double2 copy = acc;") is None
    assert _split("for (int i = 0; i < n; ++i) { acc.x += x[i]; acc = rotate(acc); }") is None
    assert _split("if (threadIdx.x == 0) s[0] = acc; out[0] = s[0].x;", shared="__shared__ double2 s[4];") is None
    no_pair = parse_source("__global__ void k(float* o) { float s = 0.f; o[0] = s; }")
    assert split_compound_accumulators(KernelSource(no_pair, no_pair.kernel("k"))) is None
