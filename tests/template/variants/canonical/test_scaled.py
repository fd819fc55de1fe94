"""scaled: a stride loop over the first elements of W-element packs read as a stride loop over the packs."""

from __future__ import annotations

from cutune.cuda.parse import parse_source
from cutune.template.variants import propose_variants
from cutune.template.variants.canonical.scaled import scaled_to_packs

PACKED = """
template <typename T>
__global__ void k(T* __restrict__ out, const T* __restrict__ in, long n) {
  constexpr int kWidth = 16 / sizeof(T);
  for (long i = (blockIdx.x * blockDim.x + threadIdx.x) * kWidth; i < n; i += blockDim.x * gridDim.x * kWidth) {
#pragma unroll
    for (int j = 0; j < kWidth; ++j) {
      if (i + j < n) out[i + j] = in[i + j] * static_cast<T>(2);
    }
  }
}
"""


def _body(source: str) -> str:
    result = scaled_to_packs(parse_source(source), "k")
    assert result is not None and not isinstance(result, str), result
    k = result.kernel("k")
    return "".join(result.text[k.body_span.start_byte : k.body_span.end_byte].split())


def test_a_loop_over_pack_starts_becomes_a_grid_stride_loop_over_packs() -> None:
    body = _body(PACKED)
    assert (
        "for(longcutune_pack_i=blockIdx.x*blockDim.x+threadIdx.x;cutune_pack_i<((n)+(kWidth)-1)/(kWidth);"
        "cutune_pack_i+=blockDim.x*gridDim.x){constlongi=cutune_pack_i*(kWidth);#pragmaunroll" in body
    )
    variants, _ = propose_variants(parse_source(PACKED), "k", None)
    assert {"packs_per_thread", "persistent_grid"} <= {v.name for v in variants}


def test_a_width_known_only_at_run_time_is_left_alone() -> None:
    source = PACKED.replace("constexpr int kWidth = 16 / sizeof(T);", "const int kWidth = 16 / sizeof(T);")
    assert scaled_to_packs(parse_source(source), "k") is None


def test_a_loop_that_changes_its_index_is_refused() -> None:
    source = PACKED.replace("#pragma unroll", "i += 0;\n#pragma unroll")
    result = scaled_to_packs(parse_source(source), "k")
    assert isinstance(result, str) and "changes its index i inside the body" in result


def test_a_start_through_a_local_thread_offset_is_read_too() -> None:
    source = """
template <typename T>
__global__ void k(T* __restrict__ out, const T* __restrict__ in, int n) {
  constexpr int kWidth = 16 / sizeof(T);
  const int tid = threadIdx.x;
  const int thread_offset = tid * kWidth;
  for (int offset = thread_offset; offset < n; offset += blockDim.x * kWidth) {
    out[blockIdx.x * n + offset] = in[blockIdx.x * n + offset];
  }
}
"""
    body = _body(source)
    assert "for(intcutune_pack_offset=tid;cutune_pack_offset<((n)+(kWidth)-1)/(kWidth);" in body
    assert "cutune_pack_offset+=blockDim.x){constintoffset=cutune_pack_offset*(kWidth);" in body
    # a local written after its declaration is no fixed start
    moved = source.replace("  for (", "  if (n > 64) thread_offset = 0;\n  for (").replace(
        "const int thread_offset", "int thread_offset"
    )
    assert scaled_to_packs(parse_source(moved), "k") is None
