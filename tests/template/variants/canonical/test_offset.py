"""offset_loops: block-stride loops over an absolute index range read as loops over the range's own elements, and
the reasons they are not."""

from __future__ import annotations

import pytest

from cutune.cuda.parse import parse_source
from cutune.template.variants.canonical.offset import offset_to_row

SEGMENTS = """
__global__ void k(float* out, const float* in, const int* offsets) {
  const int first = offsets[blockIdx.x];
  const int begin = first + threadIdx.x;
  const int end = offsets[blockIdx.x + 1];
  for (int i = begin; i < end; i += blockDim.x) {
    out[i] = in[i] * 2.0f;
  }
}
"""


def test_a_loop_over_a_segment_runs_over_the_segments_elements() -> None:
    result = offset_to_row(parse_source(SEGMENTS), "k")
    assert result is not None and not isinstance(result, str), result
    assert "for (int i = threadIdx.x; i < (long long)(end) - (long long)(first); i += blockDim.x)" in result.text
    assert "out[(int)(first) + i] = in[(int)(first) + i] * 2.0f;" in result.text


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("out[i] = in[i] * 2.0f;", "out[i] = *(&i) * 2.0f;", "takes the address of its index i"),
        ("out[i] = in[i] * 2.0f;", "const int& j = i; out[j] = 0;", "takes the address of its index i"),
        ("for (int i", "for (double i", "runs an index of type `double` over an offset range"),
        ("out[i] = in[i] * 2.0f;", "out[i] = in[i]; end = 0;", "changes its index, its start or its bound"),
    ],
)
def test_refuses_where_the_range_or_the_index_could_mean_something_else(old: str, new: str, reason: str) -> None:
    source = SEGMENTS.replace(old, new).replace("const int end", "int end")
    result = offset_to_row(parse_source(source), "k")
    assert isinstance(result, str) and reason in result


def test_an_unsigned_index_and_its_place_in_the_range_are_read() -> None:
    # FasterTransformer's LayerNorm: `uint i = start` over a row found by its start, gamma read at `i - block_start`
    source = SEGMENTS.replace("for (int i", "for (uint i").replace("in[i] * 2.0f", "in[i] * g[i - first]")
    result = offset_to_row(
        parse_source(source.replace("const int* offsets", "const int* offsets, const float* g")), "k"
    )
    assert result is not None and not isinstance(result, str), result
    assert "for (uint i = threadIdx.x; i < (long long)(end) - (long long)(first); i += blockDim.x)" in result.text
    assert "out[(uint)(first) + i] = in[(uint)(first) + i] * g[i];" in result.text


def test_a_loop_from_the_thread_index_alone_or_from_another_thread_is_not_its_shape() -> None:
    block_stride = SEGMENTS.replace("first + threadIdx.x", "threadIdx.x")
    assert offset_to_row(parse_source(block_stride), "k") is None
    by_row = SEGMENTS.replace("first + threadIdx.x", "first + threadIdx.x + threadIdx.y")
    assert offset_to_row(parse_source(by_row), "k") is None


def test_the_index_read_as_a_value_is_the_originals_value_written_out() -> None:
    # FasterTransformer's int8 LayerNorm: the element's place kept in a local, and the index passed as a value
    body = "int col = i - first + 0; int at = i; out[at] = in[i] * col + (float)(i - end);"
    result = offset_to_row(parse_source(SEGMENTS.replace("out[i] = in[i] * 2.0f;", body)), "k")
    assert result is not None and not isinstance(result, str), result
    assert "int col = (i) + 0;" in result.text  # `i - first` is the new index itself
    assert "int at = ((int)(first) + i);" in result.text
    assert "out[at] = in[(int)(first) + i] * col + (float)(((int)(first) + i) - end);" in result.text
