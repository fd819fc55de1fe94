"""Helper inlining and 2-D (flattened row/column) vectorisation: checked textually, by compiling with nvcc
and NVRTC (registers, stack frame, vector instructions in the PTX), and by the reasons they refuse."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from cutune.cuda.extract import extract_kernel
from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.project import open_kernel
from cutune.template.variants import VARIANT, Vectorize, combine_all
from cutune.template.variants.inline import inline_helpers
from tests.cuda.test_extract import needs_nvrtc, nvcc_compiled_functions, nvrtc_lowered_names

from .compile import compile_both, measured_failures, name_expressions, variant_alone

SAMPLES = Path(__file__).resolve().parents[3] / "samples"

# a per-row kernel over `rows * n` elements whose accesses go through a helper: pairs (x, x + n) of each row
HALVES = """
template <typename T>
__device__ void turn(T* __restrict__ row, const T* __restrict__ w, int col, int n) {
  const float a = static_cast<float>(row[col]);
  const float b = static_cast<float>(row[n + col]);
  const float s = static_cast<float>(__ldg(w + col));
  row[col] = static_cast<T>(a * s - b);
  row[n + col] = static_cast<T>(b * s + a);
}

template <typename T>
__global__ void k(T* __restrict__ x, const T* __restrict__ w, int rows, int n, long ld) {
  const long base = blockIdx.x * ld;
  for (int i = threadIdx.x; i < rows * n; i += blockDim.x) {
    const int q = i / n;
    const int r = i % n;
    turn<T>(x + base + q * 2 * n, w, r, n);
  }
}
"""


def _inlined_body(source: str, kernel: str = "k") -> tuple[str, tuple[str, ...]]:
    result = inline_helpers(parse_source(source), kernel)
    k = result.model.kernel(kernel)
    return result.model.text[k.body_span.start_byte : k.body_span.end_byte], result.refusals


def _vectorize_refusal(source: str) -> str:
    with pytest.raises(TransformRefused) as caught:
        Vectorize().apply(parse_source(source), "k", None)
    return caught.value.reason


def test_a_void_helper_is_inlined_with_its_parameters_bound_and_its_names_renamed() -> None:
    body, refusals = _inlined_body(HALVES)
    assert not refusals
    assert "turn<T>(" not in body
    assert "T* __restrict__ cutune_inl0_row = x + base + q * 2 * n;" in body
    assert "int cutune_inl0_n = n;" in body  # a parameter named like the caller's variable cannot shadow it
    assert "cutune_inl0_row[cutune_inl0_n + cutune_inl0_col] = static_cast<T>(" in body


def test_value_helpers_are_inlined_into_declarations_and_assignments_and_nested_helpers_too() -> None:
    source = """
__device__ float twice(float v) { return 2.f * v; }
__device__ float scaled(const float* p, int j) { const float v = p[j]; return twice(v); }
__global__ void k(float* o, const float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float y = scaled(x, i);
    o[i] = scaled(x, i);
  }
}
"""
    body, refusals = _inlined_body(source)
    assert not refusals and "scaled(" not in body and "twice(" not in body
    assert "float cutune_inl0_0ret;" in body and "const float y = cutune_inl0_0ret;" in body
    # the nested calls (an assignment's right side inside each inlined block) were inlined in turn
    assert re.search(r"cutune_inl\d+_0ret = 2\.f \* cutune_inl\d+_v;", body)
    assert re.search(r"o\[i\] = 2\.f \* cutune_inl\d+_v;", body)


def test_type_template_arguments_the_call_leaves_out_are_read_from_its_arguments() -> None:
    source = (
        "template <int W, typename T>\n"
        "__device__ void twice(T* __restrict__ out, const T* in, int n) {\n"
        "  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = in[i] * static_cast<T>(W);\n}\n"
        "__global__ void k(__half* o, const __half* x, int n) {\n"
        "  twice<2>(o + blockIdx.x * n, x + blockIdx.x * n, n);\n}"
    )
    result = inline_helpers(parse_source(source), "k", looping=True)
    assert result.calls == 1 and not result.refusals
    k = result.model.kernel("k")
    body = result.model.text[k.body_span.start_byte : k.body_span.end_byte]
    assert "__half* __restrict__ cutune_inl0_out = o + blockIdx.x * n;" in body
    assert "static_cast<__half>((2))" in body


def test_a_parameter_the_call_leaves_out_takes_its_default() -> None:
    source = (
        "template <int W>\n__device__ float scaled(const float& v, float s = 2.0f * W) { return v * s; }\n"
        "template <int W>\n__global__ void k(float* o, const float* x, int n) {\n"
        "  for (int i = threadIdx.x; i < n; i += blockDim.x) { o[i] = scaled<W>(x[i]); }\n}"
    )
    body, refusals = _inlined_body(source)
    assert not refusals
    assert "const float& cutune_inl0_v = x[i];" in body and "float cutune_inl0_s = 2.0f * (W);" in body


def test_a_helper_in_an_anonymous_namespace_is_inlined_and_one_in_a_named_namespace_is_not() -> None:
    kernel = (
        "__global__ void k(float* o, const float* x, int n) {\n"
        "  for (int i = threadIdx.x; i < n; i += blockDim.x) { o[i] = twice(x[i]); }\n}\n"
    )
    helper = "__device__ float twice(float v) { return 2.0f * v; }\n"
    for where in (f"namespace {{\n{helper}}}\n{kernel}", f"namespace {{\n{helper}\n{kernel}}}\n"):
        body, refusals = _inlined_body(f"namespace ops {{\n{where}}}\n")
        assert not refusals and "twice(" not in body, refusals
    body, refusals = _inlined_body(
        f"namespace ops {{\nnamespace detail {{\n{helper}}}\nusing detail::twice;\n{kernel}}}\n"
    )
    assert refusals == ("twice: is defined in namespace 'ops::detail', the kernel in 'ops'",)


@pytest.mark.parametrize(
    ("helper", "call", "reason"),
    [
        ("__device__ float f(float v) { return v > 0 ? f(v - 1) : v; }", "o[i] = f(x[i]);", "f: is recursive"),
        (
            "__device__ float f(float v) { for (int k = 0; k < 4; ++k) { if (v < k) return 0.f; } return v; }",
            "o[i] = f(x[i]);",
            "f: returns from inside a loop (line 2)",
        ),
        (
            "__device__ float f(float v) { { if (v < 0) return 0.f; } return v; }",
            "o[i] = f(x[i]);",
            "f: returns from inside a block (line 2)",
        ),
        (
            "__device__ float f(float v) { switch (int(v)) { case 0: return 1.f; default: break; } return v; }",
            "o[i] = f(x[i]);",
            "f: returns from inside a switch (line 2)",
        ),
        (
            "template <typename T> __device__ T f(T v) { return v; }",
            "o[i] = f(x[i]);",
            "f: leaves template argument T to a deduction inlining does not make",
        ),
        (
            "__device__ float f(float v) { static int calls = 0; return v; }",
            "o[i] = f(x[i]);",
            "f: has a static local",
        ),
        ("__device__ float f(float v) { return v * n; }", "o[i] = f(x[i]);", "f: reads n from outside itself"),
        ("__device__ float f(float v) { return v; }", "o[i] = 1.f + f(x[i]);", "f: is called inside a larger expr"),
        (
            "__device__ float f(float v) { return v; }\n__device__ float f(int v) { return v; }",
            "o[i] = f(x[i]);",
            "f: is overloaded",
        ),
        ("__device__ float f(float v, ...) { return v; }", "o[i] = f(x[i]);", "f: has variadic parameters"),
        (
            "__device__ void f(float* p) { __shared__ float s[32]; s[0] = *p; }",
            "f(o + i);",
            "f: declares shared memory",
        ),
        (  # `.template` before a call without template arguments: tree-sitter cannot read the helper's text
            "__device__ void f(float* p, float v) { p->template store(v); }",
            "f(o + i, x[i]);",
            "f: has code the parser cannot read (line 2)",
        ),
    ],
)
def test_helpers_that_cannot_be_inlined_safely_stay_calls_with_the_reason(helper: str, call: str, reason: str) -> None:
    source = (
        f"float n;\n{helper}\n__global__ void k(float* o, const float* x, int n) {{\n"
        f"  for (int i = threadIdx.x; i < n; i += blockDim.x) {{ {call} }}\n}}"
    )
    body, refusals = _inlined_body(source)
    assert any(r.startswith(reason) for r in refusals), refusals
    assert "cutune_inl" not in body


def test_vectorize_packs_flattened_row_column_accesses_with_a_runtime_column_check() -> None:
    variant = Vectorize().apply(parse_source(HALVES), "k", None)
    body = variant.body
    assert "1 helper call(s) inlined" in variant.provenance.note
    # the run-time conditions: a pack never crosses a row, and every pack start is aligned (rows 0 and 1)
    assert "cutune_vec_aligned0 = (n) > 0 && (n) % cutune_vec_w0 == 0 && " in body
    assert body.count("reinterpret_cast<unsigned long long>(") == 5  # w (row-free), x and x + n at rows 0 and 1
    assert "&((x + base + static_cast<int>((static_cast<int>(n)) / n) * 2 * n))[" in body  # row 1's start
    loads = re.findall(r"cutune_vec_\d+\[cutune_vec_u0\] = cutune_vec_load<cutune_vec_w0>\((.*)\);", body)
    stores = re.findall(r"cutune_vec_store<cutune_vec_w0>\((.*), cutune_vec_\d+\[cutune_vec_u0\]\);", body)
    assert len(loads) == 3 and len(stores) == 2  # w read; both halves of x read and written
    assert all("cutune_vec_p0 * cutune_vec_w0" in a for a in loads + stores)
    assert "for (int i = static_cast<int>(cutune_vec_done0 + (threadIdx.x)); i < rows * n;" in body  # scalar tail


def test_vectorize_refuses_row_column_forms_it_cannot_prove_contiguous() -> None:
    kernel = (
        "__global__ void k(float* o, const float* x, const int* idx, int n, int m, long ld) {{\n"
        "  for (int i = threadIdx.x; i < 4 * n; i += blockDim.x) {{\n"
        "    const int q = i / n;\n    const int r = i % n;\n    {}\n  }}\n}}"
    )
    assert "its offset `2 * r` is not contiguous in i" in _vectorize_refusal(kernel.format("o[2 * r] = 0.f;"))
    assert "not contiguous in i" in _vectorize_refusal(kernel.format("o[idx[q] * ld + r] = 0.f;"))
    assert "mixes i / n with a column other than i % n" in _vectorize_refusal(
        kernel.format("o[(i / m) * ld + r] = 0.f;")
    )
    # two halves of one written row must be exactly n apart, or packs could overlap
    assert "writes o as a pack and also accesses it otherwise" in _vectorize_refusal(
        kernel.format("o[q * ld + r] = x[q * ld + r]; o[q * ld + r + 1] = 0.f;")
    )


def _rotary():  # type: ignore[no-untyped-def]
    ctx = open_kernel(SAMPLES / "rotary_embedding.cu", "rotary_embedding_kernel")
    return combine_all(ctx.template_model, "rotary_embedding_kernel", ctx.template, ctx.spec)


def test_on_rotary_embedding_vectorize_chains_onto_the_split() -> None:
    rotary = _rotary()
    assert [v.name for v in rotary.variants] == ["split_vectorized", "split_packs_per_thread", "split", "block_items"]
    vectorized = rotary.variants[0]
    assert [p.name for p in vectorized.params] == ["SPLIT", "VEC_BYTES", "PACKS", "BLOCK_DIV"]
    assert vectorized.body.count("cutune_vec_store<") == 4  # x and y halves of query and of key
    assert "apply_token_rotary_embedding<" not in vectorized.body.split("cutune_vec_done0 =")[0]


@pytest.mark.nvcc
@needs_nvrtc
def test_the_rotary_vectorized_variant_compiles_to_vector_accesses_without_local_memory(tmp_path: Path) -> None:
    rotary = _rotary()
    assert rotary.spec is not None
    configs = [
        {VARIANT: 1, "SPLIT": 4, "PACKS": 2, "VEC_BYTES": 16},
        {VARIANT: 1, "SPLIT": 1, "PACKS": 4, "VEC_BYTES": 16, "BLOCK_DIV": 4},
        {VARIANT: 1, "SPLIT": 16, "PACKS": 1, "VEC_BYTES": 8},
    ]
    expressions = name_expressions(rotary.template, rotary.spec, configs)
    entries, lowered = compile_both(rotary.template, expressions, tmp_path)
    assert len(set(entries)) == 3 and set(lowered) == set(expressions)
    unit = extract_kernel(parse_source(rotary.template.source), "rotary_embedding_kernel", instantiations=expressions)
    source = tmp_path / "rotary.cu"
    source.write_text(unit.source)
    flags = ["nvcc", "-arch=sm_90", "--expt-relaxed-constexpr", *unit.options(), str(source)]
    cubin = subprocess.run(
        [*flags, "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "r.cubin")], capture_output=True, text=True
    )
    assert cubin.returncode == 0, cubin.stderr
    frames = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores", cubin.stderr)
    assert len(frames) == 3 and all(f == ("0", "0") for f in frames)  # pack arrays live in registers
    subprocess.run([*flags, "-ptx", "-o", str(tmp_path / "r.ptx")], check=True, capture_output=True)
    ptx = (tmp_path / "r.ptx").read_text()
    assert "st.global.v4.u32" in ptx and "st.global.v4.u16" in ptx  # 16- and 8-byte stores of bf16 packs
    assert "ld.global.nc.v4.u32" in ptx  # the cos/sin cache: read-only 16-byte loads
    assert ".local" not in ptx


BLOCK_SUM = """
__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ float block_sum(float v) {
  __shared__ float partial[32];
  v = warp_sum(v);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x % 32 < blockDim.x / 32 ? partial[threadIdx.x % 32] : 0.f;
  return warp_sum(v);
}
__device__ float add_squares(float acc, float2 p) { acc += p.x * p.x; acc += p.y * p.y; return acc; }
__device__ float mean_square(float v, int n) { const float s = block_sum(v * v); return s / n; }
__global__ void k(float* o, const float2* x, int n) {
  float acc = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc = add_squares(acc, x[i]);
  acc = block_sum(acc);
  o[blockIdx.x] = acc;
  float again = block_sum(acc);
  o[blockIdx.x + 1] = again;
  const float ms = mean_square(acc, n);  // block_sum inlined a pass later, inside mean_square's block
  o[blockIdx.x + 2] = ms;
}
"""


def _looping_body(source: str) -> str:
    result = inline_helpers(parse_source(source), "k", looping=True)
    assert not result.refusals, result.refusals
    k = result.model.kernel("k")
    return " ".join(result.model.text[k.body_span.start_byte : k.body_span.end_byte].split())


def test_a_helper_with_a_barrier_and_no_loop_is_inlined() -> None:
    # its shuffles unrolled: the block reduction's barrier is what has it written out (the row transforms read it)
    loop = "for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);"
    unrolled = BLOCK_SUM.replace(
        loop, "v += __shfl_xor_sync(0xffffffffu, v, 16); v += __shfl_xor_sync(0xffffffffu, v, 8);"
    )
    body = _looping_body(unrolled)
    assert "block_sum(" not in body and "__syncthreads()" in body and "partial[" in body
    # neither a loop nor a barrier: the call stays as written
    assert "block_sum(" in _looping_body(unrolled.replace("  __syncthreads();\n", ""))


def test_a_helper_calling_a_looping_helper_is_inlined_its_shared_memory_declared_once_for_the_kernel() -> None:
    body = _looping_body(BLOCK_SUM)
    assert "block_sum(" not in body and "warp_sum(" not in body
    # one object per block, as the helper's own was: both calls use it
    assert body.count("__shared__ float cutune_shared_block_sum_partial[32];") == 1
    assert body.index("__shared__") < body.index("float acc = 0.f;")
    assert body.count("cutune_shared_block_sum_partial[threadIdx.x / 32] =") == 3
    # `acc = block_sum(acc)`: the helper's copy is the caller's local itself, no copy in or out
    assert "acc += __shfl_xor_sync(0xffffffffu, acc, " in body
    # `again = block_sum(acc)` is no update of acc: its parameter stays a copy
    assert re.search(r"float cutune_inl\d+_v = acc;", body)
    # a call left a call (inside a larger expression) moves nothing, though another call is inlined in the pass
    kernel = "__global__ void k(float* o) {\n  float v = o[0];\n  v = warp_sum(v);\n  o[0] = 1.f + block_sum(v);\n}"
    source = BLOCK_SUM[: BLOCK_SUM.index("__global__")] + kernel
    result = inline_helpers(parse_source(source), "k", looping=True)
    assert result.calls == 1 and any(
        r.startswith("block_sum: is called inside a larger expression") for r in result.refusals
    )
    assert "__shared__" not in result.model.text[result.model.text.index("__global__") :]


def test_an_accumulating_helper_updates_the_callers_local_only_where_nothing_else_can_see_it() -> None:
    source = BLOCK_SUM.replace("acc = add_squares(acc, x[i]);", "acc = warp_sum(acc);")
    assert re.search(
        r"inlined warp_sum for \(int cutune_inl\d+_o = 16; .*acc \+= __shfl_xor_sync", _looping_body(source)
    )
    for change in (
        ("float acc = 0.f;", "double acc = 0.f;"),  # the parameter converts it: a copy
        ("acc = block_sum(acc);", "float* p = &acc; acc = block_sum(acc);"),  # seen through a pointer
    ):
        body = _looping_body(BLOCK_SUM.replace(*change))
        assert re.search(r"float cutune_inl\d+_v = acc;", body) and "acc += __shfl" not in body
    # which `acc` a call means needs scopes: a double passed, a float of that name declared later
    source = BLOCK_SUM.replace("float acc = 0.f;", "double acc = 0.f;").replace(
        "o[blockIdx.x] = acc;", "{ float acc = 1.f; o[0] = acc; }"
    )
    body = _looping_body(source)
    assert re.search(r"float cutune_inl\d+_v = acc;", body) and "acc += __shfl" not in body


def _styles():  # type: ignore[no-untyped-def]
    ctx = open_kernel(SAMPLES / "rotary_styles.cu", "rotary_styles_kernel")
    return ctx, combine_all(ctx.template_model, "rotary_styles_kernel", ctx.template, ctx.spec)


def test_a_helpers_branch_on_a_template_parameter_is_packed_arm_by_arm() -> None:
    # the pair's positions, assigned in the branches of `if (NEOX)`: contiguous in one layout, interleaved in the other
    _, styles = _styles()
    vectorized = styles.variants[0]
    assert vectorized.name == "split_vectorized"
    assert vectorized.provenance.note.endswith("; each arm of `NEOX` on its own")  # GPT-J's packs only cos and sin
    neox, gptj = vectorized.body.split("} else {")
    assert vectorized.body.lstrip().startswith("if constexpr (NEOX) {")
    assert neox.count("cutune_vec_store<") == 2  # both halves of the head, read and written as packs
    assert "cutune_vec_store<" not in gptj and gptj.count("= cutune_vec_load<") == 2  # only cos and sin
    assert "= 2 * cutune_inl0_pair;" in gptj and "2 * cutune_inl0_pair" not in neox
    assert not any(line != line.rstrip() for line in vectorized.body.split("\n"))


@pytest.mark.nvcc
@needs_nvrtc
def test_the_arm_by_arm_variant_compiles_for_both_layouts(tmp_path: Path) -> None:
    ctx, styles = _styles()
    assert styles.spec is not None
    config = {VARIANT: 1, "SPLIT": 2, "PACKS": 2, "VEC_BYTES": 16}
    expressions = [
        *name_expressions(styles.template, styles.spec, [config]),
        *name_expressions(
            styles.template,
            dataclasses.replace(styles.spec, template_args={**styles.spec.template_args, "NEOX": "false"}),
            [config],
        ),
    ]
    assert any("true" in e for e in expressions) and any("false" in e for e in expressions)
    entries, lowered = compile_both(styles.template, expressions, tmp_path, ctx.path)
    assert len(set(entries)) == 2 and set(lowered) == set(expressions)


@pytest.mark.parametrize(
    ("body", "packed"),
    [
        # declared first, assigned once where it always runs, then read: its value is the assignment's
        ("int j; float v; j = i; { v = x[j]; } o[j] = 2.f * v;", True),
        ("int j; if (n > 4) { j = i; } else { j = i + 0; } o[j] = x[j];", False),  # under a condition
        ("int j; o[0] = 1.f; j = i; j = i; o[j] = x[j];", False),  # assigned twice
        ("int j = i; int m; o[m] = 0.f; m = j; o[m] = x[m];", False),  # read before it is assigned
    ],
)
def test_a_local_assigned_once_before_any_read_is_read_as_its_value(body: str, packed: bool) -> None:
    loop = f"for (int i = threadIdx.x; i < n; i += blockDim.x) {{ {body} }}"
    source = f"__global__ void k(float* o, const float* x, int n) {{\n  {loop}\n}}"
    if packed:
        variant = Vectorize().apply(parse_source(source), "k", None)
        assert variant.body.count("cutune_vec_store<") == 1 and variant.body.count("= cutune_vec_load<") == 1
    else:
        assert "which the loop body computes" in _vectorize_refusal(source)


# helpers that return early: an index wrapped into range, an activation chosen at compile time, a store skipped
EARLY = """
__device__ __forceinline__ long wrapped(const long idx, const long n) {
  if (idx < 0) {
    return idx + n;
  }
  if (idx >= n) {
    return idx - n;
  }
  return idx;
}

template <bool kGelu>
__device__ __forceinline__ float activated(float v) {
  if constexpr (kGelu) {
    const float c = 0.7978845608f * (v + 0.044715f * v * v * v);
    return 0.5f * v * (1.f + tanhf(c));
  } else {
    return v > 0.f ? v : 0.f;
  }
}

__device__ __forceinline__ void store_positive(float* out, float v) {
  if (!(v > 0.f)) return;
  *out = v;
}

template <bool kGelu>
__global__ void k(float* __restrict__ o, const float* __restrict__ x, long n, int shift) {
  for (long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)blockDim.x * gridDim.x) {
    const long from = wrapped(i - shift, n);
    float v;
    v = activated<kGelu>(x[from]);
    store_positive(o + i, v);
  }
}
"""


def test_early_returns_set_a_result_local_and_the_rest_runs_under_else() -> None:
    body, refusals = _inlined_body(EARLY)
    assert not refusals and "wrapped(" not in body and "activated<" not in body and "store_positive(" not in body
    flat = " ".join(body.split())
    # the value leaves through the call's own local; what follows a returning `if` runs only where it did not return
    assert "long cutune_inl0_0ret; {" in flat and "const long from = cutune_inl0_0ret;" in flat
    assert (
        "if (cutune_inl0_idx < 0) { cutune_inl0_0ret = cutune_inl0_idx + cutune_inl0_n; } else { "
        "if (cutune_inl0_idx >= cutune_inl0_n) { cutune_inl0_0ret = cutune_inl0_idx - cutune_inl0_n; } else { "
        "cutune_inl0_0ret = cutune_inl0_idx; } }"
    ) in flat
    # both arms of `if constexpr` set it; a void helper's bare return leaves an empty branch
    assert "if constexpr ((kGelu)) {" in flat and flat.count("cutune_inl1_0ret = ") == 2
    assert "v = cutune_inl1_0ret;" in flat
    assert "if (!(cutune_inl2_v > 0.f)) { } else { *cutune_inl2_out = cutune_inl2_v; }" in flat


@needs_nvrtc
def test_early_returns_written_out_compile_with_nvcc_and_nvrtc(tmp_path: Path) -> None:
    model = inline_helpers(parse_source(EARLY), "k").model
    expressions = ["k<true>", "k<false>"]
    entries = nvcc_compiled_functions(extract_kernel(model, "k", instantiations=expressions), tmp_path)
    lowered = nvrtc_lowered_names(extract_kernel(model, "k", instantiations=expressions, for_nvrtc=True))
    assert len(set(entries)) == 2 and set(lowered) == set(expressions)


def test_a_returning_helper_whose_rest_would_be_copied_too_often_stays_a_call() -> None:
    checks = "".join(f"  if (v > {k}.f) {{ v -= 1.f; }} else {{ if (v < -{k}.f) return 0.f; }}\n" for k in range(4))
    rest = "".join(f"  v = v * {k}.5f + sinf(v) * cosf(v) - {k}.25f;\n" for k in range(6))
    source = (
        f"__device__ float f(float v) {{\n{checks}{rest}  return v;\n}}\n"
        "__global__ void k(float* o, const float* x, int n) {\n"
        "  for (int i = threadIdx.x; i < n; i += blockDim.x) { o[i] = f(x[i]); }\n}"
    )
    body, refusals = _inlined_body(source)
    assert refusals == ("f: returns on so many paths that writing them out copies its statements more than 4 times",)
    assert "o[i] = f(x[i]);" in body


@pytest.mark.parametrize(
    "helper",
    [
        "__device__ float f(float v) { float ret = v * 2.f; return ret + 1.f; }",
        "__device__ float f(float v) { float ret = v * 2.f; if (v < 0.f) return 0.f; return ret + 1.f; }",
    ],
)
def test_a_helper_local_named_ret_does_not_hide_the_calls_result(helper: str) -> None:
    source = (
        f"{helper}\n__global__ void k(float* o, const float* x, int n) {{\n"
        "  for (int i = threadIdx.x; i < n; i += blockDim.x) { float y = f(x[i]); o[i] = y; }\n}"
    )
    body, refusals = _inlined_body(source)
    flat = " ".join(body.split())
    # the helper's own `ret` is renamed like its other locals; the value leaves through the call's result local
    assert not refusals and "float cutune_inl0_ret = cutune_inl0_v * 2.f;" in flat
    assert "float cutune_inl0_0ret; {" in flat and "cutune_inl0_0ret = cutune_inl0_ret + 1.f;" in flat
    assert "float y = cutune_inl0_0ret;" in flat


@pytest.mark.gpu
def test_an_inlined_result_left_unset_is_caught_on_the_gpu() -> None:
    # planted wrong: the inlined lookup's result never takes the mapped id (the shadowed-result bug a helper's own
    # `ret` once caused); the vectorized variant as written is equal, the planted one is rejected
    ctx = open_kernel(SAMPLES / "expert_ids.cu", "count_expert_tokens_kernel")
    spec = ctx.require_spec()
    variant = Vectorize().apply(ctx.template_model, "count_expert_tokens_kernel", spec)
    assert "cutune_inl0_0ret = cutune_inl0_ret;" in variant.body
    wrong = dataclasses.replace(
        variant, body=variant.body.replace("cutune_inl0_0ret = cutune_inl0_ret;", "cutune_inl0_0ret = 0;")
    )
    for planted, equal in ((variant, True), (wrong, False)):
        job = variant_alone(ctx, "count_expert_tokens_kernel", planted)
        passed, failed = measured_failures(job, spec, {"VARIANT"})
        assert (passed >= 1 and not failed) if equal else bool(failed), (planted is wrong, passed, failed)
