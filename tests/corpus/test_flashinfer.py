"""flashinfer's norm, activation, rope, cascade and paged-KV kernels through kernels / extract + nvcc /
templatize: nothing crashes, every `__global__` is found, ≥ 90% extract and compile, refusals are the
right ones. One cold run compiles 24 units in parallel (about 15 s on 2 cores); later runs hit the cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutune.gpu.nvcc import have_nvcc

from .corpus import CorpusReport, include_root, run_corpus

ROOT = include_root()

pytestmark = [
    pytest.mark.nvcc,
    pytest.mark.skipif(ROOT is None, reason="flashinfer-python not installed (scripts/test.sh installs it --no-deps)"),
    pytest.mark.skipif(not have_nvcc(), reason="nvcc not on PATH"),
]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> CorpusReport:
    assert ROOT is not None
    cache = Path(__file__).resolve().parents[2] / ".cutune" / "corpus-cache"  # kept between runs, like `check`'s
    cache.mkdir(parents=True, exist_ok=True)
    return run_corpus(ROOT, cache)


def test_every_global_kernel_is_found_and_nothing_crashes(report: CorpusReport) -> None:
    for file, declared in report.declared.items():
        found = [k.kernel for k in report.kernels if k.file == file]
        assert sorted(found) == sorted(declared), file
    assert report.found() >= 20
    assert [k for k in report.kernels if k.error] == []


def test_at_least_90_percent_extract_and_compile(report: CorpusReport) -> None:
    assert report.count("extracted") == report.found()
    assert report.count("compiled") >= 0.9 * report.found(), [
        (k.kernel, k.compile_error) for k in report.kernels if not k.compiled
    ]
    assert all(k.registers for k in report.kernels if k.compiled)  # the kernel's own entry, by name


def test_most_kernels_get_a_parameter_of_their_own(report: CorpusReport) -> None:
    assert report.count("templatized") >= 0.75 * report.found()


def _refusals(report: CorpusReport, kernel: str, recipe: str) -> list[str]:
    return [reason for k in report.kernels if k.kernel == kernel for r, reason in k.refusals if r == recipe]


def test_refusal_reasons(report: CorpusReport) -> None:
    # flashinfer launches through cudaLaunchKernelEx, not <<<>>>: no launch to read a block size from
    assert _refusals(report, "RMSNormKernel", "block_threads") == [
        "no launch of RMSNormKernel in this file, so its threads per block are unknown"
    ]
    # a struct argument is data, not a size
    assert any(
        "paged_kv: a paged_kv_t<DType, IdType>, not an integral size" in r
        for r in _refusals(report, "AppendPagedKVCacheKernel", "specialize")
    )
    # only bare `#pragma unroll`: nothing to tune
    assert any("only bare `#pragma unroll`" in r for r in _refusals(report, "MergeStateKernel", "unroll"))
    # floats are never specialised
    assert any(
        "epsilon" not in r or "not an integral size" in r for r in _refusals(report, "RMSNormKernel", "specialize")
    )


def test_a_function_template_argument_without_a_function_of_its_type_says_why(report: CorpusReport) -> None:
    """activation.cuh defines no `float (const float&)` function: flashinfer's JIT writes silu/gelu into the
    unit it generates (flashinfer/jit/activation.py), so the corpus passes nullptr and says so."""
    act = next(k for k in report.kernels if k.kernel == "act_and_mul_kernel")
    assert act.instantiation == "act_and_mul_kernel<float, nullptr>" and act.compiled
    assert act.instantiation_note == (
        "Activation: no device function of type `float (*)(const float&)` in the file; instantiated with nullptr"
    )


def test_unneeded_project_headers_are_dropped(report: CorpusReport) -> None:
    """norm.cuh includes TensorRT-LLM helpers that need cuBLAS/cuRAND headers; RMSNorm uses none of them."""
    rms = next(k for k in report.kernels if k.kernel == "RMSNormKernel")
    assert rms.compiled, rms.compile_error
    assert any("trtllm/common/cudaUtils.h" in note for note in rms.notes)
