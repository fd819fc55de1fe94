"""loop_macros: a loop written through a macro whose definition is a `for` header, expanded as the preprocessor does."""

from __future__ import annotations

from pathlib import Path

from cutune.cuda.parse import parse_source
from cutune.template.variants import propose_variants
from cutune.template.variants.canonical import canonicalise
from cutune.template.variants.canonical.loop_macros import expand_loop_macros

HEADER = """
#pragma once
// every thread visits its elements of [0, n), the grid's threads one after another
#define GRID_STRIDE(idx, count) \\
  for (long idx = (long)blockIdx.x * blockDim.x + threadIdx.x; /* x axis */ \\
       idx < (count); idx += (long)blockDim.x * gridDim.x)
"""

USE = """
template <typename T>
__global__ void k(const int n, const float alpha, const T* x, T* y) {
  const float a = alpha * 0.5f;
  GRID_STRIDE(e, n) {
    const float v = static_cast<float>(x[e]);
    y[e] = static_cast<T>(v * a + 1.0f);
  }
}
"""

LOOPED = HEADER + USE  # the macro in the file itself


def _body(result: object, kernel: str = "k") -> str:
    assert result is not None and not isinstance(result, str), result
    model = result  # a SourceModel
    k = model.kernel(kernel)  # type: ignore[attr-defined]
    return "".join(model.text[k.body_span.start_byte : k.body_span.end_byte].split())  # type: ignore[attr-defined]


def test_a_loop_macro_defined_in_the_file_is_expanded_and_the_stride_transforms_apply() -> None:
    body = _body(expand_loop_macros(parse_source(LOOPED), "k"))
    assert "for(longe=(long)blockIdx.x*blockDim.x+threadIdx.x;e<(n);e+=(long)blockDim.x*gridDim.x){" in body
    assert "/*" not in body  # the definition's comment is not part of the expansion
    variants, _ = propose_variants(parse_source(LOOPED), "k", None)
    assert {"vectorize", "packs_per_thread", "grid_shape"} <= {v.provenance.origin for v in variants}


def test_a_loop_macro_is_found_in_a_header_beside_the_file_or_on_the_include_path(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "loops.h").write_text(HEADER)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "common.h").write_text('#pragma once\n#include "loops.h"\n')
    path = tmp_path / "src" / "k.cu"
    path.write_text('#include "common.h"\n' + USE)
    model = parse_source(path.read_text(), str(path))
    missing = expand_loop_macros(model, "k")
    assert isinstance(missing, str) and "`GRID_STRIDE(...)`" in missing and "#define" in missing
    assert "for(longe=" in _body(expand_loop_macros(model, "k", [str(tmp_path / "inc")]))
    canonical = canonicalise(model, "k", [str(tmp_path / "inc")])
    assert canonical.applied[0] == "loop_macros"


def test_a_statement_without_braces_and_arguments_with_commas_expand_token_for_token() -> None:
    source = HEADER + (
        "__global__ void k(int n, int m, float* y) {\n  GRID_STRIDE(i, min(n, m)) y[i] = 0.0f;\n  GRID_STRIDE(idx, n)\n"
        "    y[idx] += 1.0f;\n}\n"
    )
    body = _body(expand_loop_macros(parse_source(source), "k"))
    loop = "for(longi=(long)blockIdx.x*blockDim.x+threadIdx.x;i<(min(n,m));i+=(long)blockDim.x*gridDim.x)y[i]=0.0f;"
    assert loop in body
    assert "idx<(n);idx+=" in body


def test_a_macro_defined_two_ways_or_not_a_loop_header_is_refused_with_the_reason() -> None:
    twice = "#if FAST\n#define GRID_STRIDE(i, n) for (int i = threadIdx.x; i < (n); i += blockDim.x)\n#else" + HEADER
    result = expand_loop_macros(parse_source(twice + "#endif\n" + USE), "k")
    assert isinstance(result, str) and "defined differently in two places" in result
    guard = "#define GRID_STRIDE(i, n) if (threadIdx.x < (n))\n"
    result = expand_loop_macros(parse_source(guard + USE), "k")
    assert isinstance(result, str) and "not a `for` header" in result


def test_a_kernel_without_loop_macros_is_left_alone() -> None:
    source = (
        "__global__ void k(float* y) {\n  // NOT_A_LOOP(i, n) { y[i] = 0; }\n"
        "  y[threadIdx.x] = fmaxf(y[threadIdx.x], 0.0f);\n  __syncthreads();\n}\n"
    )
    assert expand_loop_macros(parse_source(source), "k") is None


BROKEN = """
#define KERNEL_LOOP(i, n) for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)
__global__ void k(const int n, const float* x, float* y) {
  const float a = 2.0f;

  KERNEL_LOOP(j, n / 4)
  {
    y[j] = a * x[j];
  }
}
"""


def test_a_kernel_that_parses_only_once_its_loop_macro_is_expanded_gets_its_variants() -> None:
    model = parse_source(BROKEN)
    assert model.kernel("k").has_errors  # tree-sitter reads `KERNEL_LOOP(...)` then a block as broken syntax
    canonical = canonicalise(model, "k")
    assert canonical.applied[0] == "loop_macros" and not canonical.model.kernel("k").has_errors
    variants, _ = propose_variants(model, "k", None)
    assert {"vectorized", "packs_per_thread"} <= {v.name for v in variants}
    # broken for another reason too: nothing is rewritten, the transforms say why
    worse = BROKEN.replace("y[j] = a * x[j];", "y[j] = a * x[j] +;")
    assert canonicalise(parse_source(worse), "k").applied == ()
    _, refusals = propose_variants(parse_source(worse), "k", None)
    assert any("syntax errors" in r.reason for r in refusals)
