"""while_loops: stride loops written as `while` (one index restarted for each, too) read as the `for` loops they are,
and the reasons they are not."""

from __future__ import annotations

import pytest

from cutune.cuda.parse import parse_source
from cutune.template.variants import propose_variants
from cutune.template.variants.canonical.while_loops import while_to_for

ROWS = """
__global__ void k(float* out, const float* in, int n) {
  const int row = blockIdx.x;
  int c = threadIdx.x;
  while (c < n) {
    // one element of the row
    out[row * n + c] = 2.0f * in[row * n + c];
    c += blockDim.x;
  }
}
"""


def test_a_while_stride_loop_becomes_a_for_loop_the_transforms_read() -> None:
    result = while_to_for(parse_source(ROWS), "k")
    assert result is not None and not isinstance(result, str), result
    k = result.kernel("k")
    body = result.text[k.body_span.start_byte : k.body_span.end_byte]
    assert "for (int c = threadIdx.x; c < n; c += blockDim.x) {" in body
    assert "// one element of the row" in body and "while" not in body
    variants, _ = propose_variants(parse_source(ROWS), "k", None)
    assert [v.name for v in variants] == ["split_vectorized", "split_packs_per_thread", "split", "block_items"]


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("  }\n}", "  }\n  out[c] = 0.0f;\n}", "uses c outside the loop"),
        ("    out[row", "    if (in[c] > 0.0f) continue;\n    out[row", "has a `continue`"),
        ("    out[row", "    c = c * 1;\n    out[row", "changes c inside its body besides the last step"),
        ("  int c = threadIdx.x;\n", "", "which is not declared with a value in the same block before it"),
    ],
)
def test_while_loops_a_for_loop_could_change_are_refused_with_the_reason(old: str, new: str, reason: str) -> None:
    result = while_to_for(parse_source(ROWS.replace(old, new)), "k")
    assert isinstance(result, str) and reason in result, result


def test_a_while_loop_that_is_no_stride_loop_is_left_alone() -> None:
    source = "__global__ void k(int* out, int n) { int x = n; while (x > 1) { x /= 2; } out[0] = x; }"
    assert while_to_for(parse_source(source), "k") is None


RESTARTED = """
__global__ void k(float* grad, const float* out, int n) {
  const int row = blockIdx.x;
  float dot = 0.0f;
  int i = threadIdx.x;
  while (i < n) {
    dot += grad[row * n + i] * out[row * n + i];
    i += blockDim.x;
  }
  for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
  i = threadIdx.x;
  while (i < n) {
    grad[row * n + i] = out[row * n + i] * (grad[row * n + i] - dot);
    i += blockDim.x;
  }
}
"""


def test_an_index_restarted_for_a_second_while_loop_gives_each_loop_its_own() -> None:
    result = while_to_for(parse_source(RESTARTED), "k")
    assert result is not None and not isinstance(result, str), result
    k = result.kernel("k")
    body = result.text[k.body_span.start_byte : k.body_span.end_byte]
    assert body.count("for (int i = threadIdx.x; i < n; i += blockDim.x) {") == 2
    assert "while" not in body and "i = threadIdx.x;" not in body.replace("int i = threadIdx.x;", "")


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        # the first loop's last index read before the restart: a `for` would have dropped it
        ("  i = threadIdx.x;\n", "  out[0] = i;\n  i = threadIdx.x;\n", "uses i outside the loop"),
        ("  i = threadIdx.x;\n", "  i = i - n;\n", "starts i from itself"),
        # the second loop cannot be a `for`: neither is rewritten, the restart would be left without its declaration
        ("    grad[row * n + i] = out", "    if (dot > 0.0f) continue;\n    grad[row * n + i] = out", "uses i outside"),
        # no restart: the second loop goes on from where the first ended (each `for` would need the same start)
        ("  i = threadIdx.x;\n", "", "shares i with the loop at line 11, which goes on from where the loop at line 6"),
    ],
)
def test_loops_of_an_index_used_between_them_are_refused_together(old: str, new: str, reason: str) -> None:
    result = while_to_for(parse_source(RESTARTED.replace(old, new)), "k")
    assert isinstance(result, str) and reason in result, result


def test_a_while_loop_inside_one_that_cannot_be_a_for_loop_still_becomes_one() -> None:
    # the outer loop over rows reads its index after it; the inner stride loop over the row's columns is read alone
    source = """
__global__ void k(float* out, const float* in, int rows, int n) {
  int r = blockIdx.x;
  while (r < rows) {
    int c = threadIdx.x;
    while (c < n) {
      out[r * n + c] = in[r * n + c];
      c += blockDim.x;
    }
    r += gridDim.x;
  }
  out[0] = r;
}
"""
    result = while_to_for(parse_source(source), "k")
    assert result is not None and not isinstance(result, str), result
    assert "for (int c = threadIdx.x; c < n; c += blockDim.x) {" in result.text and "while (r < rows)" in result.text
