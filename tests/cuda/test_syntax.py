"""The parser's view of a text it cannot read as written (cuda/syntax.py): a functional cast to a dependent type
(cub's `typename Ktraits::BlockLoadT(smem).Load(...)`) is read without its keyword, a `#pragma` between a
statement's header and its unbraced body without the pragma, at the same offsets."""

from __future__ import annotations

from tree_sitter import Parser

from cutune.cuda.parse import parse_source
from cutune.cuda.syntax import LANGUAGE, device_view_spans
from cutune.template.variants import propose_variants
from tests.cuda.test_conditionals import SPLIT

CUB = """\
template <typename Ktraits>
__global__ void scale_rows(float* __restrict__ out, const float* __restrict__ in, int n) {
  __shared__ typename Ktraits::BlockReduceT::TempStorage smem;
  float v = in[blockIdx.x * blockDim.x + threadIdx.x];
  const float total = typename Ktraits::BlockReduceT(smem).Sum(v);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    out[i] = in[i] * total;
  }
}
"""


def test_a_dependent_functional_cast_parses_and_the_text_keeps_its_keyword() -> None:
    model = parse_source(CUB)
    assert not model.kernel("scale_rows").has_errors and not model.issues
    assert model.text == CUB and device_view_spans(CUB.encode()) == ()  # no line left out
    variants, _ = propose_variants(model, "scale_rows", None)  # the transforms read the kernel (the sum is thread 0's)
    assert [v.name for v in variants] == ["packs_per_thread"]
    assert "const float total = typename Ktraits::BlockReduceT(smem).Sum(v);" in variants[0].body


def test_as_written_the_cast_does_not_parse() -> None:
    # the view is what makes it parse: the same kernel with a syntax error elsewhere still reports only that one
    broken = CUB.replace("out[i] = in[i] * total;", "out[i] = in[i] * total")
    issues = parse_source(broken).issues
    assert len(issues) == 1 and issues[0].span.start.line == 6


def test_with_conditionals_that_split_braces_both_views_apply_and_only_the_left_out_lines_are_spans() -> None:
    text = SPLIT.replace(
        "    float sum = 0.0f;\n",
        "    float sum = 0.0f;\n    typename cub::BlockReduce<float, 128>(partial).Sum(sum);\n",
    )
    model = parse_source(text)
    assert not model.kernel("k").has_errors and not model.issues
    spans = device_view_spans(text.encode())
    assert spans and all(b"typename" not in text.encode()[a:b] for a, b in spans)


PRAGMA_BODIES = """\
__global__ void taps(float* __restrict__ out, const float* __restrict__ in, const float* __restrict__ f, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    float v = 0.0f;
    if (i + 4 <= n)  // whole taps only
#pragma unroll
      for (int t = 0; t < 4; ++t)
#pragma unroll 2
        for (int u = 0; u < 2; ++u) v += in[i + t] * f[2 * t + u];
    out[i] = v;
  }
}
"""


def test_a_pragma_between_a_header_and_its_unbraced_body_is_read_past_and_kept_in_the_text() -> None:
    model = parse_source(PRAGMA_BODIES)
    assert not model.kernel("taps").has_errors and not model.issues
    assert model.text == PRAGMA_BODIES and device_view_spans(PRAGMA_BODIES.encode()) == ()  # nothing left out
    variants, _ = propose_variants(model, "taps", None)
    assert "packs_per_thread" in [v.name for v in variants]
    # tree-sitter alone cannot read it: the view is what makes it parse
    assert Parser(LANGUAGE).parse(PRAGMA_BODIES.encode()).root_node.has_error
