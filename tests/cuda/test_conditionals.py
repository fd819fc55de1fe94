"""The device pass's view of a text whose preprocessor conditionals split its braces: what it decides, what it
leaves, that the text keeps its offsets, and that a kernel read through it parses while a rewrite that would drop
a branch it left out is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutune.cuda.conditionals import device_view
from cutune.cuda.extract import extract_kernel
from cutune.cuda.parse import parse_source
from cutune.cuda.syntax import device_view_spans
from cutune.template.variants import propose_variants, with_variants
from tests.cuda.test_extract import needs_nvrtc, nvcc_compiled_functions, nvrtc_lowered_names

# an RMSNorm whose 16-bit form is a stub before sm_80: the branch opens a brace a later branch closes
SPLIT = """
template <typename T>
__global__ void k(T* __restrict__ out, const T* __restrict__ in, const float eps, const int n) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
  if constexpr (sizeof(T) == 2) {
    return;
  } else {
#endif
    __shared__ float partial[32];
    __shared__ float inv;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const float x = static_cast<float>(in[blockIdx.x * n + i]);
      sum += x * x;
    }
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
      float total = 0.0f;
      for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += partial[w];
      inv = rsqrtf(total / n + eps);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      out[blockIdx.x * n + i] = static_cast<T>(static_cast<float>(in[blockIdx.x * n + i]) * inv);
    }
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
  }
#endif
}
"""


def test_a_kernel_whose_branches_split_its_braces_parses_as_the_device_pass_reads_it() -> None:
    model = parse_source(SPLIT)
    assert not model.kernel("k").has_errors and not model.issues
    assert model.text == SPLIT  # the text is the file's: only the parse read the view
    spans = device_view_spans(SPLIT.encode())
    assert [SPLIT.encode()[a:b].decode().strip() for a, b in spans][:2] == [
        "#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800",
        "if constexpr (sizeof(T) == 2) {\n    return;\n  } else {",
    ]


def test_a_text_that_parses_as_it_is_is_read_as_it_is() -> None:
    balanced = (
        "__global__ void k(float* x) {\n#if __CUDA_ARCH__ >= 900\n  x[0] = 1.f;\n#else\n  x[0] = 2.f;\n#endif\n}\n"
    )
    assert device_view_spans(balanced.encode()) == ()
    assert not parse_source(balanced).kernel("k").has_errors


def test_a_new_body_is_kept_inside_the_guard_around_the_original_one() -> None:
    variants, _ = propose_variants(parse_source(SPLIT), "k", None)
    guard = "#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800"
    rewritten = next(v.body for v in variants if v.name == "row_reduce")
    assert rewritten.lstrip().startswith(guard + "\n  if constexpr (sizeof(T) == 2) {")
    assert rewritten.rstrip().endswith(guard + "\n  }\n#endif") and "cutune_rr_allreduce" in rewritten
    kept = next(v.body for v in variants if v.name == "vectorized")  # rewritten in place: the guard stays as is
    assert kept.count(guard) == 2


# the branch left out sits between the body's statements and reads one declared before it: a new body cannot be
# wrapped in it
GUARD = "#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800\n"
MIDDLE = SPLIT.replace(GUARD + "  if constexpr (sizeof(T) == 2) {\n    return;\n  } else {\n#endif\n", "").replace(
    "    float sum = 0.0f;\n",
    "    float sum = 0.0f;\n" + GUARD + "  if (n < 0) {\n    sum = 1.0f;\n  } else {\n#endif\n",
)


def test_a_rewrite_that_would_drop_a_branch_between_the_statements_is_refused() -> None:
    assert MIDDLE != SPLIT and not parse_source(MIDDLE).kernel("k").has_errors
    variants, refusals = propose_variants(parse_source(MIDDLE), "k", None)
    dropped = [r.reason for r in refusals if r.recipe == "row_reduce"]
    assert dropped and "drops `#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800` (line" in dropped[0]
    assert "row_reduce" not in {v.name for v in variants} and "vectorized" in {v.name for v in variants}


@pytest.mark.parametrize(
    ("text", "blanked"),
    [
        ("#ifdef USE_ROCM\na\n#else\nb\n#endif\n", ["#ifdef USE_ROCM", "a", "#else", "#endif"]),
        ("#if !defined(GGML_USE_HIP)\na\n#endif\n", ["#if !defined(GGML_USE_HIP)", "#endif"]),
        ("#ifdef MMCV_WITH_HIP\na\n#else\nb\n#endif\n", ["#ifdef MMCV_WITH_HIP", "a", "#else", "#endif"]),
        (  # a branch per architecture, each opening a brace the code after the group closes
            "#if 0\na\n#elif __CUDA_ARCH__ >= 900\nb {\n#else\nc {\n#endif\n",
            ["#if 0", "a", "#elif __CUDA_ARCH__ >= 900", "#else", "c {", "#endif"],
        ),
        (
            "#if defined(__CUDA_ARCH__) && \\\n    __CUDA_ARCH__ < 800\n} else {\n#endif // old\n",
            ["#if defined(__CUDA_ARCH__) && \\\n    __CUDA_ARCH__ < 800", "} else {", "#endif // old"],
        ),
        ("#if ENABLE_FP8\na {\n#endif\n", []),  # a project's own switch: not the pass's to decide
        (
            "#if defined(__CUDA_ARCH__) || ENABLE_FP8\na {\n#endif\n",
            ["#if defined(__CUDA_ARCH__) || ENABLE_FP8", "#endif"],
        ),
        (  # an `if` whose `else` takes the statement after the group
            "#if __CUDA_ARCH__ >= 1000\nif (fast) {\n  a();\n} else\n#endif\n{\n  b();\n}\n",
            ["#if __CUDA_ARCH__ >= 1000", "if (fast) {\n  a();\n} else", "#endif"],
        ),
        ("#ifndef __CUDA_ARCH__\nlaunch();\n#endif\n", []),  # balanced: maybe host code, which reads the other
        ("#if __CUDA_ARCH__ < 800\nx = '{'; // {\n#endif\n", []),  # braces in a literal and a comment
        ("#if ENABLE_FP8 && defined(USE_ROCM)\na\n#endif\n", ["#if ENABLE_FP8 && defined(USE_ROCM)", "a", "#endif"]),
        ("a\n#endif\n", []),  # unpaired: left as it is
        ("#if 1\na\n", []),
    ],
)
def test_what_the_device_pass_decides(text: str, blanked: list[str]) -> None:
    view, spans = device_view(text.encode())
    assert len(view) == len(text.encode()) and view.count(b"\n") == text.count("\n")
    assert [text.encode()[a:b].decode().strip() for a, b in spans if text.encode()[a:b].strip()] == blanked


@pytest.mark.nvcc
@needs_nvrtc
@pytest.mark.parametrize("value_type", ["float", "__half"])
def test_the_original_and_the_variants_that_keep_the_branches_compile_for_each_architecture(
    value_type: str, tmp_path: Path
) -> None:
    model = parse_source(SPLIT)
    variants, _ = propose_variants(model, "k", None)
    chosen = [v for v in variants if v.name in ("vectorized", "row_reduce")]
    template, _ = with_variants(model, "k", chosen, None)
    combined = parse_source(template.source)
    # VARIANT, then VEC_BYTES, PACKS (vectorized) and ROW_THREADS, ROW_VEC (row_reduce)
    names = [f"k<{value_type}, {variant}, 16, 2, 256, 4>" for variant in (0, 1, 2)]
    unit = extract_kernel(combined, "k", instantiations=names)
    for arch in ("sm_75", "sm_90"):  # the branch left out is the one sm_75 compiles
        assert len(nvcc_compiled_functions(unit, tmp_path, f"-arch={arch}")) == 3
    assert set(nvrtc_lowered_names(extract_kernel(combined, "k", instantiations=names, for_nvrtc=True))) == set(names)
