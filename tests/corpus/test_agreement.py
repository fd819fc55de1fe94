"""`check` and the compile path of `tune` agree, kernel by kernel, on a slice of the three production corpora
(flashinfer, DeepSpeed, llama.cpp): same compiler, options and unit where the original compiles, a failure on
both sides where it does not. The whole sweep is benchmarks/corpus_compile.py. Real tree-sitter, nvcc, NVRTC."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutune.gpu.compile_cache import CompileCache
from cutune.gpu.nvcc import have_nvcc

from .agreement import Agreement, sweep
from .sources import corpora

FOUND = corpora()
# (corpus, file, kernel) → what check says of its original: the compiler, or None where it does not compile
SLICE: dict[tuple[str, str, str], str | None] = {
    # a project header includes <cuda.h> and standard headers (<type_traits>): under NVRTC they stand in for what
    # device code reads of them (version macros; CCCL's <cuda/std/...>)
    ("flashinfer", "flashinfer/comm/trtllm_allreduce.cuh", "lamport_initialize_kernel"): "nvrtc",
    # the same (<stdint.h>, and INFINITY, which the real <cuda.h> brings through <math.h>), and check evaluated its
    # grid before compiling (once: "division by zero", while tune compiled)
    ("deepspeed", "transformer/inference/csrc/softmax.cu", "attn_softmax_v2"): "nvrtc",
    # a project header's host code needs the C++ library itself (`std::` names CCCL does not have): nvcc
    ("flashinfer", "flashinfer/attention/blackwell/plan.cuh", "plan_kernel"): "nvcc",
    ("deepspeed", "quantization/quantize_intX.cu", "dequantize_int4_to_half"): "nvrtc",
    # `namespace cg = cooperative_groups;` with <cooperative_groups.h> only in a header the unit leaves out
    ("deepspeed", "random_ltd/slice_attn_masks.cu", "slice_gpt_mask_impl"): "nvrtc",
    # neither compiler: the draft takes T = __half from the dispatch where the launch passes at::acc_type (float),
    # and `/` on __half is ambiguous
    ("deepspeed", "lamb/fused_lamb_cuda_kernel.cu", "lamb_cuda_kernel_part1"): None,
    ("llama.cpp", "src/ggml-cuda/acc.cu", "acc_f32"): "nvrtc",
    ("llama.cpp", "src/ggml-cuda/rope.cu", "rope_norm"): "nvrtc",
    # FLT_MAX and `half` came through common.cuh, which the unit leaves out
    ("llama.cpp", "src/ggml-cuda/diagmask.cu", "diag_mask_inf_f32"): "nvrtc",
    ("llama.cpp", "src/ggml-cuda/conv2d-transpose.cu", "conv2d_transpose_kernel"): "nvrtc",
}

pytestmark = [
    pytest.mark.nvcc,
    pytest.mark.skipif(not have_nvcc(), reason="nvcc not on PATH"),
    pytest.mark.skipif(
        set(FOUND) != {"flashinfer", "deepspeed", "llama.cpp"},
        reason="a corpus is missing (scripts/test.sh installs flashinfer-python; scripts/corpus.sh the others)",
    ),
]


@pytest.fixture(scope="module")
def results() -> list[Agreement]:
    cache = Path(__file__).resolve().parents[2] / ".cutune" / "corpus-cache"  # kept between runs, like `check`'s
    keep = {(c, f, k) for c, f, k in SLICE}
    return sweep(
        list(FOUND.values()), CompileCache(cache), only=lambda c, p, k: (c.name, str(p.relative_to(c.root)), k) in keep
    )


def test_the_slice_covers_the_three_corpora(results: list[Agreement]) -> None:
    assert sorted((r.corpus, r.file, r.kernel) for r in results) == sorted(SLICE)


def test_check_and_tune_compile_the_same_unit_the_same_way(results: list[Agreement]) -> None:
    assert [(r.kernel, r.check, r.tune) for r in results if not r.agree] == []


def test_what_check_says_of_each_original(results: list[Agreement]) -> None:
    said = {(r.corpus, r.file, r.kernel): (r.check.compiler if r.check.compiled else None) for r in results}
    assert said == SLICE, {r.kernel: r.check.error for r in results if not r.check.compiled}
    fallbacks = [r.check.fallback for r in results if r.check.compiler == "nvcc"]
    # the one fallback says what NVRTC lacked, and where
    assert len(fallbacks) == 1 and 'exception.h(74): error: namespace "std" has no member' in fallbacks[0]
