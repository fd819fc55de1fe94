"""thread_count: loops stepping by a compile-time thread count read as block-stride loops where every launch in the
file runs that many threads, or, without a launch, where the kernel's whole-block cub::BlockReduce fixes its block;
refused where a launch runs another count or the reduction does not bind every thread."""

from __future__ import annotations

from pathlib import Path

import pytest

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


REDUCED = """
#include <cub/block/block_reduce.cuh>
template <int kThreads>
__global__ void k(float* out, const float* in, int n) {
  using BlockReduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename BlockReduce::TempStorage store;
  __shared__ float s_total;
  float acc = 0.0f;
  for (int c = threadIdx.x; c < n; c += kThreads) {
    acc += in[blockIdx.x * n + c];
  }
  const float total = BlockReduce(store).Sum(acc);
  if (threadIdx.x == 0) s_total = total;
  __syncthreads();
  for (int c = threadIdx.x; c < n; c += kThreads) {
    out[blockIdx.x * n + c] = in[blockIdx.x * n + c] / s_total;
  }
}
"""


def test_a_whole_block_cub_reduction_fixes_the_block_without_a_launch() -> None:
    result = block_size_strides(parse_source(REDUCED), "k")
    assert result is not None and not isinstance(result, str), result
    assert result.text.count("c += blockDim.x)") == 2 and "c += kThreads" not in result.text
    # unqualified under `using namespace cub;`: CUB's
    unqualified = REDUCED.replace("cub::BlockReduce<", "BlockReduce<")
    with_using = unqualified.replace("template <int kThreads>", "using namespace cub;\ntemplate <int kThreads>")
    result = block_size_strides(parse_source(with_using), "k")
    assert result is not None and not isinstance(result, str), result
    variants, _ = propose_variants(parse_source(REDUCED), "k", None)
    assert "row_reduce" in [v.name for v in variants]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (("Sum(acc)", "Sum(acc, n)"), "a count of valid threads: smaller blocks are allowed"),
        (("const float total = ", "const float total = n > 0 ? 0.0f : "), "not every thread evaluates it"),
        (("float, kThreads>", "float, kThreads, cub::BLOCK_REDUCE_RAKING, 2>"), "a block two rows high"),
        (("  float acc = 0.0f;", "  if (blockIdx.x >= n) return;\n  float acc = 0.0f;"), "a return before it"),
        (("cub::BlockReduce<", "BlockReduce<"), "a project's own BlockReduce, not CUB's"),
    ],
)
def test_a_reduction_that_does_not_bind_every_thread_proves_nothing(change: tuple[str, str], why: str) -> None:
    result = block_size_strides(parse_source(REDUCED.replace(*change)), "k")
    assert isinstance(result, str) and "no launch of k in this file" in result, why


WARPED = """
#define WARP_SIZE 32
__global__ void k(float* out, const float* in, int rows, int n) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  float acc = 0.0f;
  for (int c = threadIdx.x; c < n; c += WARP_SIZE) acc += in[row * n + c];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  for (int c = threadIdx.x; c < n; c += WARP_SIZE) out[row * n + c] = in[row * n + c] / acc;
}

void launch(float* out, const float* in, int rows, int n, cudaStream_t stream) {
  const dim3 block(WARP_SIZE, 4);
  k<<<(rows + 3) / 4, block, 0, stream>>>(out, in, rows, n);
}
"""


def test_a_macro_thread_count_every_launch_runs_is_read_as_blockdim(tmp_path: Path) -> None:
    result = block_size_strides(parse_source(WARPED), "k")
    assert result is not None and not isinstance(result, str), result
    assert result.text.count("c += blockDim.x)") == 2
    # defined in a project header the file includes, found beside it
    (tmp_path / "warp.cuh").write_text("#pragma once\n#define WARP_SIZE 32  // lanes\n")
    path = tmp_path / "k.cu"
    path.write_text(WARPED.replace("#define WARP_SIZE 32", '#include "warp.cuh"'))
    result = block_size_strides(parse_source(path.read_text(), str(path)), "k")
    assert result is not None and not isinstance(result, str), result


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (("block(WARP_SIZE, 4)", "block(64, 4)"), "runs `64` threads per block where WARP_SIZE is `32`"),
        (("#define WARP_SIZE 32", "#define WARP_SIZE 32\n#undef WARP_SIZE\n#define WARP_SIZE 64"), None),
        (("#define WARP_SIZE 32", "#define WARP_SIZE warpSize"), None),
    ],
)
def test_a_macro_count_a_launch_or_its_definitions_contradict_is_not_read(
    change: tuple[str, str], reason: str | None
) -> None:
    result = block_size_strides(parse_source(WARPED.replace(*change)), "k")
    assert result == reason if reason is None else isinstance(result, str) and reason in result
