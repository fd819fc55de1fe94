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


STARTED_BEFORE = """
__global__ void k(const float* __restrict__ partials, float* __restrict__ out, int splits, int total) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  const int stride = blockDim.x * gridDim.x;
  for (; idx < total; idx += stride) {
    float acc = 0.0f;
    for (int s = 0; s < splits; ++s) acc += partials[s * total + idx];
    if (acc == 0.0f) continue;  // the update still runs: the loop steps as it did
    out[idx] = acc;
  }
}
"""


def test_a_for_loop_without_an_initializer_takes_the_index_declared_before_it() -> None:
    result = while_to_for(parse_source(STARTED_BEFORE), "k")
    assert result is not None and not isinstance(result, str), result
    k = result.kernel("k")
    body = "".join(result.text[k.body_span.start_byte : k.body_span.end_byte].split())
    assert "for(intidx=blockIdx.x*blockDim.x+threadIdx.x;idx<total;idx+=stride){floatacc=0.0f;" in body
    assert "if(acc==0.0f)continue;" in body and body.count("intidx") == 1
    variants, _ = propose_variants(parse_source(STARTED_BEFORE), "k", None)
    assert {v.name for v in variants} >= {"vectorized", "packs_per_thread", "persistent_grid"}


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("    out[idx] = acc;\n  }\n", "    out[idx] = acc;\n  }\n  out[idx] = 0.0f;\n", "uses idx outside the loop"),
        ("    out[idx] = acc;", "    out[idx] = acc;\n    idx += 1;", "changes idx inside its body"),
        ("  int idx = blockIdx.x", "  int idx;\n  idx = idx + blockIdx.x", "starts idx from itself"),
        # the start moves down to the loop: what it reads must not change on the way
        ("  const int stride", "  total = splits;\n  const int stride", None),
        ("blockIdx.x * blockDim.x + threadIdx.x;", "out[0] * blockDim.x;\n  out[0] = 1.0f;", "from memory or a call"),
        ("blockIdx.x * blockDim.x + threadIdx.x;", "splits;\n  splits = 2;", "starts idx from splits, which changes"),
    ],
)
def test_for_loops_without_an_initializer_the_rewrite_could_change_are_refused(
    old: str, new: str, reason: str | None
) -> None:
    source = STARTED_BEFORE.replace(old, new)
    assert source != STARTED_BEFORE
    result = while_to_for(parse_source(source), "k")
    if reason is None:  # a change before the loop to what the start does not read
        assert result is not None and not isinstance(result, str), result
    else:
        assert isinstance(result, str) and reason in result and "the for loop at line" in result, result


def test_a_one_statement_for_body_is_kept() -> None:
    source = (
        "__global__ void k(float* out, int n) {\n  int i = threadIdx.x + blockIdx.x * blockDim.x;\n"
        "  for (; i < n; i += blockDim.x * gridDim.x) out[i] = 1.0f;\n}"
    )
    result = while_to_for(parse_source(source), "k")
    assert result is not None and not isinstance(result, str), result
    assert "for (int i = threadIdx.x + blockIdx.x * blockDim.x; i < n; i += blockDim.x * gridDim.x) {" in result.text
    assert "out[i] = 1.0f;" in result.text
