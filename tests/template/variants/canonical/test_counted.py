"""counted: a block-stride loop written as a count of strides with a bounds check, read as the stride loop."""

from __future__ import annotations

from cutune.cuda.parse import parse_source
from cutune.template.variants import propose_variants
from cutune.template.variants.canonical.counted import counted_to_stride

COUNTED = """
__global__ void k(const float4* in, const float4* bias, float4* out, int width, int iterations) {
  const int row = blockIdx.x;
  const int id = threadIdx.x;
  const int stride = blockDim.x;
  for (int i = 0; i < iterations; i++) {
    if (i * stride + id < width) {
      float4 v = in[row * width + i * stride + id];
      const float4 b = bias[i * stride + id];
      v.x += b.x * i;
      out[row * width + i * stride + id] = v;
    }
  }
}
"""


def _body(source: str) -> str:
    result = counted_to_stride(parse_source(source), "k")
    assert result is not None and not isinstance(result, str), result
    k = result.kernel("k")
    return "".join(result.text[k.body_span.start_byte : k.body_span.end_byte].split())


def test_a_counted_loop_becomes_a_block_stride_loop_over_the_indices_both_bounds_allow() -> None:
    body = _body(COUNTED)
    assert (
        "for(intcutune_idx0=threadIdx.x;cutune_idx0<min(width,(iterations)*blockDim.x);cutune_idx0+=blockDim.x){"
    ) in body
    # each `i * stride + id` term pair is the new index; `i` itself is recomputed where still read
    assert "constinti=(cutune_idx0-threadIdx.x)/blockDim.x;" in body
    assert "in[row*width+cutune_idx0]" in body and "bias[cutune_idx0]" in body and "v.x+=b.x*i;" in body
    # the round `i` is the thread's: regrouping the elements among threads would change it; packs_per_thread keeps
    # each thread's elements, in their order, so each still reads its own round
    variants, refusals = propose_variants(parse_source(COUNTED), "k", None)
    assert "vectorized" not in {v.name for v in variants} and "packs_per_thread" in {v.name for v in variants}
    assert any("reads threadIdx.x in its body" in r.reason for r in refusals if r.recipe == "vectorize")
    without_round = COUNTED.replace("v.x += b.x * i;", "v.x += b.x;")
    variants, _ = propose_variants(parse_source(without_round), "k", None)
    assert {"vectorized", "packs_per_thread"} <= {v.name for v in variants}


def test_a_count_the_body_changes_is_refused() -> None:
    result = counted_to_stride(parse_source(COUNTED.replace("v.x += b.x * i;", "iterations = 0;")), "k")
    assert isinstance(result, str) and "has a bound or count that changes (iterations)" in result


def test_a_counted_loop_over_something_else_is_left_alone() -> None:
    source = COUNTED.replace("i * stride + id < width", "i + id < width")
    assert counted_to_stride(parse_source(source), "k") is None


# llama.cpp's rounds counted by their offset: `col0` steps by the block, the element is `col0 + tid`
OFFSETS = """
__global__ void k(const float* x, float* y, const int n) {
  const int tid = threadIdx.x;
  const int block = blockDim.x;
  for (int col0 = 0; col0 < n; col0 += block) {
    const int col = col0 + tid;
    if (col < n) {
      y[blockIdx.x * n + col] = x[blockIdx.x * n + col] * 2.0f;
    }
  }
}
"""


def test_rounds_counted_by_their_offset_are_the_stride_loop_from_the_thread() -> None:
    body = _body(OFFSETS)
    assert "for(intcol=threadIdx.x;col<n;col+=blockDim.x){y[blockIdx.x*n+col]=x[blockIdx.x*n+col]*2.0f;}" in body
    assert "col0" not in body


def test_rounds_counted_by_their_offset_that_read_it_or_step_otherwise_stay() -> None:
    reads = OFFSETS.replace("* 2.0f;", "* col0;")
    result = counted_to_stride(parse_source(reads), "k")
    assert isinstance(result, str) and "reads the round's offset col0 besides its element col" in result
    for other in ("const int block = 2 * blockDim.x;", "const int block = blockDim.y;"):
        assert counted_to_stride(parse_source(OFFSETS.replace("const int block = blockDim.x;", other)), "k") is None
    assert counted_to_stride(parse_source(OFFSETS.replace("col0 + tid", "col0 + tid + 1")), "k") is None
