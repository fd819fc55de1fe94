"""The index_bits recipe: 64-bit index arithmetic switched to 32 bits by INDEX_BITS (64 compiles to the original's
PTX, 32 to one without 64-bit divisions, both with nvcc and NVRTC), its refusals, the size rule of the space and
the host guard a dispatch writes around a 32-bit launch."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cutune.apply.config import apply_config, apply_dispatch
from cutune.cuda.parse import parse_source
from cutune.errors import RecipeRefused, SourceError
from cutune.limits import limits_for
from cutune.spec import ArgSpec, KernelSpec
from cutune.template.edits import apply_edits
from cutune.template.model import Config, Space, Template
from cutune.template.recipes.base import Draft
from cutune.template.recipes.index_bits import CONSTRAINT, NAME, IndexBits, index_param
from cutune.template.templatize import templatize
from cutune.tune.dispatch import plan_dispatch
from cutune.tune.space import Feasibility
from tests.template.kernels import in_parallel, kernel_entry, nvcc
from tests.template.variants.compile import compile_both, name_expressions

# one element per thread, 64-bit indices throughout, a row index read from memory: the shape of a cache write
SCATTER = """\
#include <cstdint>

namespace demo {

// dst[rows[r], c] = src[r, c] for every element of src: [n_rows, cols]
template <typename T>
__global__ void scatter_rows_kernel(const T* __restrict__ src, const int64_t* __restrict__ rows,
                                    T* __restrict__ dst, const int64_t cols, const int64_t n_rows,
                                    const int64_t dst_stride) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t total = cols * n_rows;
  if (idx >= total) {
    return;
  }
  const int64_t r = idx / cols;
  const int64_t c = idx % cols;
  const int64_t dst_row = rows[r];
  dst[dst_row * dst_stride + c] = src[r * cols + c];
}

}  // namespace demo

void scatter_rows(const float* src, const int64_t* rows, float* dst, int64_t n_rows, int64_t cols,
                  int64_t dst_stride, cudaStream_t stream) {
  const int64_t total = n_rows * cols;
  const int blocks = (total + 255) / 256;
  demo::scatter_rows_kernel<float><<<blocks, 256, 0, stream>>>(src, rows, dst, cols, n_rows, dst_stride);
}
"""
KERNEL = "scatter_rows_kernel"
HELPER = "cutune_index<INDEX_BITS, int64_t, int>"


def _spec(*sizes: dict[str, int]) -> KernelSpec:
    args = (
        ArgSpec("src", "float32", shape=("n_rows", "cols")),
        ArgSpec("rows", "int64", shape=("n_rows",)),
        ArgSpec("dst", "float32", shape=("n_rows", "cols")),
        ArgSpec("cols", "int64", value="cols"),
        ArgSpec("n_rows", "int64", value="n_rows"),
        ArgSpec("dst_stride", "int64", value="cols"),
    )
    return KernelSpec(KERNEL, args, sizes, ("(n_rows * cols + 255) / 256",), ("256",), template_args={"T": "float"})


def _templatized(text: str = SCATTER) -> Template:
    return templatize(parse_source(text, "scatter.cu"), KERNEL, recipes=["index_bits"])


def test_index_arithmetic_narrows_while_loaded_values_and_the_thread_index_keep_their_declarations() -> None:
    t = _templatized()
    assert t.applied == ("index_bits",) and t.space.params == (index_param(),)
    assert t.space.constraints == (CONSTRAINT,) and t.space.default() == Config.of({NAME: 64})
    body = t.source[t.source.index("const int64_t idx") :]
    assert body.startswith("const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;")
    assert f"const {HELPER} r = {HELPER}(idx) / {HELPER}(cols);" in body
    assert f"const {HELPER} total = {HELPER}(cols) * {HELPER}(n_rows);" in body
    assert "const int64_t dst_row = rows[r];" in body  # a value read from memory keeps its 64 bits
    assert "int INDEX_BITS = scatter_rows_kernel_tuning::INDEX_BITS" in t.source
    again = templatize(parse_source(t.source, "scatter.cu"), KERNEL, recipes=["index_bits"])
    assert again.source == t.source and again.space == t.space  # templatizing twice changes nothing


def test_unsigned_operands_are_converted_and_divisions_outside_64_bit_locals_narrow_too() -> None:
    text = (
        "__global__ void k(float* out, const int64_t n, unsigned lane) {\n"
        "  const int64_t i = int64_t(blockIdx.x) * blockDim.x;\n"
        "  const int64_t q = (i - threadIdx.x - lane) / n;\n"
        "  const int z = blockIdx.z % n;\n"
        "  out[q + z + threadIdx.y / n] = 1.f;\n}\n"
    )
    source = templatize(parse_source(text, "k.cu"), "k", recipes=["index_bits"]).source
    narrow = "cutune_index<INDEX_BITS, int64_t, int>"
    # as written, threadIdx.x and lane convert to int64_t: a difference below zero stays signed at 32 bits too
    assert f"const {narrow} q = ({narrow}(i) - {narrow}(threadIdx.x) - {narrow}(lane)) / {narrow}(n);" in source
    assert f"const int z = {narrow}(blockIdx.z) % {narrow}(n);" in source  # already 32-bit: only the modulo narrows
    assert f"out[q + z + {narrow}(threadIdx.y) / {narrow}(n)]" in source  # a division anywhere else, too


def test_two_kernels_of_one_namespace_share_the_type_helper() -> None:
    second = SCATTER.replace(
        "}  // namespace demo",
        (
            "__global__ void row_of_kernel(int64_t* out, const int64_t cols) {\n"
            "  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;\n"
            "  const int64_t r = i / cols;\n"
            "  out[i] = r;\n"
            "}\n\n}  // namespace demo"
        ),
    )
    first = templatize(parse_source(second, "two.cu"), KERNEL, recipes=["index_bits"]).source
    both = templatize(parse_source(first, "two.cu"), "row_of_kernel", recipes=["index_bits"]).source
    assert both.count("struct cutune_index_type {") == 1 and "cutune_index<INDEX_BITS, int64_t, int> r = " in both
    nvcc(both)


def test_64_compiles_to_the_originals_ptx_and_32_drops_the_64_bit_divisions_with_nvcc_and_nvrtc(
    tmp_path: Path,
) -> None:
    t = _templatized()
    narrow = t.source.replace("static constexpr int INDEX_BITS = 64;", "static constexpr int INDEX_BITS = 32;")
    ptx = in_parallel({"original": lambda: nvcc(SCATTER), "64": lambda: nvcc(t.source), "32": lambda: nvcc(narrow)})
    entries = {k: kernel_entry(v, KERNEL) for k, v in ptx.items()}
    assert entries["64"] == entries["original"]
    assert re.search(r"\b(div|rem)\.s64\b", entries["original"])
    assert not re.search(r"\b(div|rem)\.[su]64\b", entries["32"]) and re.search(r"\bdiv\.s32\b", entries["32"])
    expressions = name_expressions(t, _spec({"n_rows": 4, "cols": 8}), [{}, {NAME: 32}])
    compiled, lowered = compile_both(t, expressions, tmp_path)
    assert len(set(lowered.values())) == 2 and len(compiled) == 2


def _refusal(body: str, params: str = "const int64_t* rows, float* out, const int64_t n") -> str:
    text = f"__global__ void k({params}) {{\n{body}\n}}\n"
    model = parse_source(text, "k.cu")
    with pytest.raises(RecipeRefused) as e:
        IndexBits().apply(model, model.kernel("k"), Draft(text))
    return e.value.reason


def test_refusals_name_the_reason() -> None:
    tid = "  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;\n"
    assert _refusal("  int i = threadIdx.x; out[i / 3] = 1.f;", "float* out, int n").startswith(
        "no 64-bit integer index arithmetic"
    )
    assert _refusal(tid + "  out[i] = 1.f;") == "no 64-bit local is index arithmetic alone: i is a thread index"
    loaded = _refusal("  const int64_t row = rows[blockIdx.x];\n  const int64_t q = row / n;\n  out[q] = 1.f;")
    assert loaded == (
        "no 64-bit local is index arithmetic alone: row is computed from `rows[blockIdx.x]` (line 2); "
        "q is computed from `row` (line 3)"
    )
    passed = _refusal(tid + "  long long q = i * n;\n  atomicAdd(&q, 1ll);")
    assert "q is passed by reference or to a function (line 4)" in passed
    assert _refusal(tid + "  const int64_t j = i * n + 1;\n  out[j] = 1.f;") == (
        "nothing to gain: the narrowable 64-bit locals take part in no division or modulo"
    )
    assert _refusal("  out[threadIdx.x * n] = 1.f;") == (
        "no 64-bit index arithmetic to narrow: the 64-bit arguments (n) are used as they are"
    )


def test_32_bits_is_feasible_only_where_every_index_extent_fits_in_2_to_the_30() -> None:
    space = Space((index_param(),), (CONSTRAINT,))
    limits = limits_for("sm_90")
    small, large = {"n_rows": 4096, "cols": 4096}, {"n_rows": 2**16, "cols": 2**15}
    assert _spec(small).index_extent(small) == 2**24 and _spec(large).index_extent(large) == 2**31
    narrow = Config.of({NAME: 32})
    assert Feasibility(space, _spec(small), limits).violation(narrow) is None
    why = Feasibility(space, _spec(small, large), limits).violation(narrow)
    assert why is not None and "index_extent <= 1073741824" in why and "n_rows=65536" in why
    assert Feasibility(space, _spec(small, large), limits).violation(space.default()) is None


def test_a_dispatch_launches_32_bits_only_under_the_hosts_extent_guard_and_a_default_never() -> None:
    t = _templatized()
    model = parse_source(t.source, "scatter.cu", rewrite=True)
    sizes = ({"n_rows": 16, "cols": 4096}, {"n_rows": 8192, "cols": 4096})
    spec = _spec(*sizes)
    narrow, wide = Config.of({NAME: 32}), t.space.default()
    plan = plan_dispatch(sizes, [narrow, wide], wide)
    applied = apply_dispatch(model, KERNEL, plan, t.space, sizes, note="x", extents=spec.extent_exprs())
    host = apply_edits(t.source, applied.edits)
    host = host[host.index("void scatter_rows(") :]
    guard = (
        "if ((static_cast<long long>(n_rows) * static_cast<long long>(cols)) <= 1073741824 && "
        "static_cast<long long>(n_rows) <= 1073741824 && static_cast<long long>(cols) <= 1073741824) {"
    )
    assert guard in host and "scatter_rows_kernel<float, 32><<<" in host
    assert host.count("scatter_rows_kernel<float><<<") == 2  # the 64-bit fallback and the other range
    nvcc(apply_edits(t.source, applied.edits))
    # one 32-bit configuration at every size is still guarded; with no extents to test it launches 64 bits
    one = plan_dispatch(sizes, [narrow, narrow], wide)
    guarded = apply_edits(t.source, apply_dispatch(model, KERNEL, one, t.space, sizes, note="x", extents=()).edits)
    assert "<float, 32>" not in guarded and "INDEX_BITS = 64;" in guarded
    with pytest.raises(SourceError, match="only written under a per-size guard"):
        apply_config(model, KERNEL, narrow, t.space)
