"""inline_helpers: helpers from the project headers a file includes, and a call that leaves its argument dead."""

from __future__ import annotations

from pathlib import Path

from cutune.cuda.parse import parse_source
from cutune.template.variants.canonical.inline import inline_looping_helpers

HEADER = """
#pragma once
namespace app {
template <typename T>
__device__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}
}  // namespace app
"""
KERNEL = """
#include "reduce.cuh"
namespace app {
__global__ void k(float* out, const float* x, int n) {
  float acc = x[threadIdx.x];
  float total = warp_sum<float>(acc);
  acc = 0.0f;
  out[threadIdx.x] = total + acc;
}
}  // namespace app
"""


def _inlined(tmp_path: Path, kernel: str, header: str = HEADER) -> str:
    (tmp_path / "reduce.cuh").write_text(header)
    path = tmp_path / "k.cu"
    path.write_text(kernel)
    result = inline_looping_helpers(parse_source(kernel, str(path)), "k")
    assert result is not None and not isinstance(result, str), result
    return result.text


def test_a_headers_helper_is_written_out_and_its_dead_argument_updated_in_place(tmp_path: Path) -> None:
    text = _inlined(tmp_path, KERNEL)
    assert "// cutune: inlined warp_sum" in text
    # `acc` is set afresh right after the call: the helper's updates go to it, no copy
    assert "acc += __shfl_xor_sync(0xffffffff, acc, cutune_inl0_o);" in text


def test_an_argument_read_after_the_call_is_copied(tmp_path: Path) -> None:
    text = _inlined(tmp_path, KERNEL.replace("  acc = 0.0f;\n", ""))
    assert "float cutune_inl0_v = acc;" in text


def test_a_helper_in_another_namespace_is_not_taken(tmp_path: Path) -> None:
    (tmp_path / "reduce.cuh").write_text(HEADER.replace("namespace app", "namespace other"))
    path = tmp_path / "k.cu"
    path.write_text(KERNEL)
    assert inline_looping_helpers(parse_source(KERNEL, str(path)), "k") is None
