"""thread_count: loops stepping by a compile-time thread count read as block-stride loops where every launch in the
file runs that many threads, and refused where a launch runs another count."""

from __future__ import annotations

from cutune.cuda.parse import parse_source
from cutune.template.variants import propose_variants
from cutune.template.variants.canonical.thread_count import block_size_strides

COUNTED_THREADS = """
template <int kThreads>
__global__ void k(float* out, const float* in, int n) {
  const int row = blockIdx.x;
  for (int c = threadIdx.x; c < n; c += kThreads) {
    out[row * n + c] = in[row * n + c] * 3.0f;
  }
}

void launch(float* out, const float* in, int rows, int n, cudaStream_t stream) {
  if (n < 1024) {
    const dim3 block(256, 1, 1);
    k<256><<<rows, block, 0, stream>>>(out, in, n);
  } else {
    k<1024><<<rows, 1024, 0, stream>>>(out, in, n);
  }
}
"""


def test_a_thread_count_every_launch_matches_is_read_as_blockdim() -> None:
    result = block_size_strides(parse_source(COUNTED_THREADS), "k")
    assert result is not None and not isinstance(result, str), result
    assert "c += blockDim.x)" in result.text and "c += kThreads" not in result.text
    variants, _ = propose_variants(parse_source(COUNTED_THREADS), "k", None)
    assert [v.name for v in variants] == ["split_vectorized", "split_packs_per_thread", "split", "block_items"]


def test_a_launch_with_another_block_size_is_refused_with_the_reason() -> None:
    source = COUNTED_THREADS.replace("k<256><<<rows, block", "k<128><<<rows, block")
    result = block_size_strides(parse_source(source), "k")
    assert isinstance(result, str) and "runs `256` threads per block where kThreads is `128`" in result


def test_without_a_launch_in_the_file_the_count_is_unknown() -> None:
    source = COUNTED_THREADS[: COUNTED_THREADS.index("void launch")]
    result = block_size_strides(parse_source(source), "k")
    assert isinstance(result, str) and "no launch of k in this file" in result
