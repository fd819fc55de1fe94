"""Each recipe on real kernel shapes: where it applies, what it writes, and why it refuses elsewhere."""

from __future__ import annotations

import pytest

from cutune.cuda.parse import parse_source
from cutune.template.model import Binding, Template
from cutune.template.templatize import templatize

from .kernels import load


def run(shape: str, *recipes: str) -> Template:
    model, kernel = load(shape)
    return templatize(model, kernel, recipes=recipes or None)


def run_text(text: str, kernel: str, *recipes: str) -> Template:
    return templatize(parse_source(text), kernel, recipes=recipes)


def refusal(template: Template, recipe: str) -> str:
    reasons = [r.reason for r in template.refused if r.recipe == recipe]
    assert reasons, f"{recipe} did not refuse; applied: {template.applied}"
    return reasons[0]


# -- block_threads ---------------------------------------------------------------------------------


def test_block_threads_literal_launch_writes_the_struct_and_the_launch() -> None:
    t = run("elementwise_if", "block_threads")
    assert t.applied == ("block_threads",)
    assert (
        "// cutune: tunable parameters of scale_kernel (defaults are the original choices; "
        "`cutune tune` searches them)\n"
        "struct scale_kernel_tuning {\n"
        "  static constexpr int BLOCK_THREADS = 256;  // threads per block\n"
        "};\n\n"
        "__global__ void scale_kernel("
    ) in t.source
    ref = "scale_kernel_tuning::BLOCK_THREADS"
    assert f"scale_kernel<<<(n + ({ref} - 1)) / {ref}, {ref}, 0, stream>>>" in t.source
    p = t.space.param("BLOCK_THREADS")
    assert (p.default, p.binding) == (256, Binding.LAUNCH)  # the kernel reads blockDim at run time
    assert p.values == (32, 64, 128, 256, 512, 1024)
    assert set(t.space.constraints) == {
        "BLOCK_THREADS <= max_threads_per_block",
        "BLOCK_THREADS % warp_size == 0",
    }


def test_block_threads_follows_local_variables_and_qualifies_across_namespaces() -> None:
    relu = run("elementwise_return", "block_threads")
    assert "dim3 block(ops::relu_kernel_tuning::BLOCK_THREADS);" in relu.source
    assert "namespace ops {\n\n// cutune: tunable parameters of relu_kernel" in relu.source
    axpy = run("grid_stride", "block_threads")
    assert "const int threads = axpy_kernel_tuning::BLOCK_THREADS;" in axpy.source
    assert axpy.space.param("BLOCK_THREADS").default == 512


def test_block_threads_cap_is_a_launch_parameter() -> None:
    t = run("silu_and_mul", "block_threads")
    assert "dim3 block(std::min(d, serving::silu_and_mul_kernel_tuning::BLOCK_THREADS));" in t.source
    p = t.space.param("BLOCK_THREADS")
    assert (p.default, p.binding) == (1024, Binding.LAUNCH)
    assert "at most" in p.description


def test_block_threads_reuses_the_kernels_own_template_parameter() -> None:
    t = run("merge_attn_states", "block_threads")
    assert "constexpr uint NUM_THREADS = merge_attn_states_kernel_tuning::NUM_THREADS;" in t.source
    assert "template <typename scalar_t, const uint NUM_THREADS>\n" in t.source  # unchanged: launches pass it
    p = t.space.param("NUM_THREADS")
    assert (p.default, p.binding) == (128, Binding.TEMPLATE)
    dot = run("bounds_2", "block_threads")
    assert "constexpr int kBlock = dot4_kernel_tuning::BLOCK;" in dot.source
    assert dot.space.param("BLOCK").binding is Binding.TEMPLATE


@pytest.mark.parametrize(
    ("shape", "reason"),
    [
        (
            "shared_tile",
            "the shared array `__shared__ float tile[256];` (line 3) is sized for 256 threads; "
            "make its size a parameter first",
        ),
        ("multi_launch", "launch sites disagree on the block size: 128 at line 14, 256 at line 16"),
        (
            "runtime_block",
            "the block size `threads` (line 21) is computed at run time, with no literal to tune",
        ),
        ("block_2d", "multi-dimensional blocks not supported yet (`(16, 16)` at line 9)"),
        ("bounds_3", "no launch of cluster_kernel in this file, so its threads per block are unknown"),
    ],
)
def test_block_threads_refusals(shape: str, reason: str) -> None:
    t = run(shape, "block_threads")
    assert refusal(t, "block_threads") == reason
    assert t.source == load(shape)[0].text


def test_block_threads_refuses_a_block_size_macro() -> None:
    text = (
        "#define THREADS 256\n__global__ void k(float* x) { x[threadIdx.x] = 0; }\n"
        "void f(float* x) { k<<<1, THREADS>>>(x); }\n"
    )
    assert "macro THREADS" in refusal(run_text(text, "k", "block_threads"), "block_threads")


# -- launch_bounds ---------------------------------------------------------------------------------


def test_launch_bounds_one_argument_ties_threads_to_the_block_parameter() -> None:
    t = run("bounds_1", "block_threads", "launch_bounds")
    assert (
        "template <typename T, int BLOCK_THREADS = square_kernel_tuning::BLOCK_THREADS,\n"
        "          int MIN_BLOCKS = square_kernel_tuning::MIN_BLOCKS>\n"
        "__global__ void __launch_bounds__(BLOCK_THREADS, MIN_BLOCKS) square_kernel("
    ) in t.source
    assert t.space.param("BLOCK_THREADS").binding is Binding.TEMPLATE  # the kernel needs it at compile time now
    assert t.space.param("MIN_BLOCKS").default == 0  # none was written: 0 compiles as no minimum
    assert "BLOCK_THREADS <= 256" not in t.space.constraints  # tied: no longer a fixed cap
    assert "BLOCK_THREADS * MIN_BLOCKS <= max_threads_per_sm" in t.space.constraints


def test_launch_bounds_alone_keeps_the_cap_as_a_constraint() -> None:
    t = run("bounds_1", "block_threads")
    assert "BLOCK_THREADS <= 256" in t.space.constraints
    assert "__launch_bounds__(256)" in t.source


def test_launch_bounds_two_arguments() -> None:
    t = run("bounds_2", "block_threads", "launch_bounds")
    assert "__launch_bounds__(BLOCK, MIN_BLOCKS) dot4_kernel(" in t.source
    assert "int MIN_BLOCKS = dot4_kernel_tuning::MIN_BLOCKS" in t.source
    p = t.space.param("MIN_BLOCKS")
    assert (p.default, p.values) == (4, (1, 2, 3, 4, 6, 8))


def test_launch_bounds_added_for_a_compile_time_block_size() -> None:
    t = run("merge_attn_states", "block_threads", "launch_bounds")
    assert "__global__ void __launch_bounds__(NUM_THREADS, MIN_BLOCKS) merge_attn_states_kernel(" in t.source


@pytest.mark.parametrize(
    ("shape", "reason"),
    [
        ("bounds_3", "__launch_bounds__ with a cluster size (3rd argument) is not supported yet"),
        (
            "elementwise_if",
            "no __launch_bounds__ and no compile-time block size (the block size is only known at "
            "the launch), so there is no thread count to bound",
        ),
    ],
)
def test_launch_bounds_refusals(shape: str, reason: str) -> None:
    assert refusal(run(shape, "block_threads", "launch_bounds"), "launch_bounds") == reason


# -- unroll ----------------------------------------------------------------------------------------


def test_unroll_names_each_factor_after_its_loop() -> None:
    t = run("bounds_2", "unroll")
    assert "#pragma unroll UNROLL\n  for (int k = 0; k < 4; ++k)" in t.source
    assert "#pragma unroll UNROLL_2\n  for (int k = 0; k < n % 8; ++k)" in t.source
    assert t.space.param("UNROLL").default == 4
    assert t.space.param("UNROLL_2").values == (1, 2, 4, 8, 16)
    assert "#pragma unroll factor of the loop `for (int k = 0; k < n % 8; ++k)`" in t.source


def test_unroll_refusals() -> None:
    assert refusal(run("silu_and_mul", "unroll"), "unroll") == (
        "only bare `#pragma unroll` here: it unrolls fully, as the trip count decides, so there is no factor to tune"
    )
    assert refusal(run("elementwise_if", "unroll"), "unroll") == "no `#pragma unroll N` in the kernel"


# -- items_per_thread ------------------------------------------------------------------------------


def test_items_per_thread_loops_over_block_chunks() -> None:
    t = run("elementwise_if", "items_per_thread")
    assert (
        "template <int ITEMS_PER_THREAD = scale_kernel_tuning::ITEMS_PER_THREAD>\n"
        "__global__ void scale_kernel(float* __restrict__ out, const float* __restrict__ in, float alpha, "
        "int64_t n) {\n"
        "  for (int item = 0; item < ITEMS_PER_THREAD; ++item) {\n"
        "    const int64_t i = static_cast<int64_t>(blockIdx.x * ITEMS_PER_THREAD + item) * blockDim.x + "
        "threadIdx.x;\n"
        "    if (i < n) {\n"
        "      out[i] = alpha * in[i];\n"
        "    }\n"
        "  }\n"
        "}\n"
    ) in t.source
    ref = "scale_kernel_tuning::ITEMS_PER_THREAD"
    assert f"scale_kernel<<<(((n + 255) / 256) + {ref} - 1) / {ref}, 256, 0, stream>>>" in t.source
    assert t.space.param("ITEMS_PER_THREAD").binding is Binding.TEMPLATE


def test_items_per_thread_early_return_becomes_continue() -> None:
    t = run("elementwise_return", "items_per_thread")
    assert (
        "    const unsigned int i = (blockIdx.x * ITEMS_PER_THREAD + item) * blockDim.x + threadIdx.x;\n"
        "    if (i >= n) continue;\n" in t.source
    )
    ref = "ops::relu_kernel_tuning::ITEMS_PER_THREAD"
    assert f"dim3 grid((((n + block.x - 1) / block.x) + {ref} - 1) / {ref});" in t.source


def test_items_per_thread_on_merge_attn_states_uses_its_thread_count_parameter() -> None:
    t = run("merge_attn_states", "items_per_thread")
    assert "const uint global_idx = (blockIdx.x * ITEMS_PER_THREAD + item) * NUM_THREADS + threadIdx.x;" in t.source
    assert "if (global_idx >= token_head_threads) continue;" in t.source


def test_items_per_thread_grid_stride_changes_only_the_grid() -> None:
    model, _ = load("grid_stride")
    t = run("grid_stride", "items_per_thread")
    kernel_end = model.text.index("void axpy(")
    ref = "axpy_kernel_tuning::ITEMS_PER_THREAD"
    grid = f"axpy_kernel<<<(blocks + {ref} - 1) / {ref},"
    assert t.source.endswith(model.text[kernel_end:].replace("axpy_kernel<<<blocks,", grid))
    assert model.text[model.text.index("__global__") : kernel_end] in t.source  # kernel unchanged
    assert t.space.param("ITEMS_PER_THREAD").binding is Binding.LAUNCH


@pytest.mark.parametrize(
    ("shape", "reason"),
    [
        (
            "row_reduce",
            "already loops inside the block (the loop at line 13 steps by blockDim.x): one block per row",
        ),
        (
            "silu_and_mul",
            "already loops inside the block (the loop at line 27 steps by blockDim.x): one block per row",
        ),
        (
            "shared_tile",
            "the kernel uses __shared__ (line 3): threads of a block cooperate, so one thread cannot "
            "take several block-chunks",
        ),
        ("return_in_loop", "a `return` inside a loop or switch (line 6) cannot become `continue`"),
        ("block_2d", "blockIdx.y is used beyond the index (line 4), so block-chunks are not independent"),
        ("bounds_3", "no launch of cluster_kernel in this file, so there is no grid to divide"),
    ],
)
def test_items_per_thread_refusals(shape: str, reason: str) -> None:
    assert refusal(run(shape, "items_per_thread"), "items_per_thread") == reason


def test_items_per_thread_keeps_a_lambdas_own_returns() -> None:
    # the thread's exit becomes `continue` of its chunk; a lambda's returns are the lambda's (as `continue` they would
    # not compile)
    kernel = (
        "__global__ void k(float* out, const float* x, int n) {\n"
        "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= n) return;\n"
        "  auto f = [=](float v) { if (v < 0.f) return 0.f; return v; };\n  out[i] = f(x[i]);\n}\n"
        "void run(float* o, const float* x, int n) { k<<<(n + 255) / 256, 256>>>(o, x, n); }\n"
    )
    t = run_text(kernel, "k", "items_per_thread")
    assert "items_per_thread" in t.applied, t.refused
    assert "if (i >= n) continue;" in t.source and "{ if (v < 0.f) return 0.f; return v; }" in t.source


def test_items_per_thread_refuses_two_dimensional_grids_and_missing_guards() -> None:
    kernel = "__global__ void k(float* x, int n) {\n  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n{}}\n"
    launch = "void f(float* x, int n) {\n  dim3 grid((n + 255) / 256, 2);\n  k<<<grid, 256>>>(x, n);\n}\n"
    guarded = run_text(kernel.replace("{}", "  if (i < n) x[i] = 0;\n") + launch, "k", "items_per_thread")
    assert refusal(guarded, "items_per_thread") == (
        "the grid `grid` (line 6) is a dim3 with more than one dimension above 1"
    )
    unguarded = run_text(kernel.replace("{}", "  x[i] = 0;\n") + launch, "k", "items_per_thread")
    assert refusal(unguarded, "items_per_thread").startswith("no bounds check on i right after it")
    shuffle = kernel.replace("{}", "  if (i < n) x[i] = __shfl_sync(~0u, x[i], 0);\n")
    assert "__shfl_sync" in refusal(run_text(shuffle + launch, "k", "items_per_thread"), "items_per_thread")


# -- specialize ------------------------------------------------------------------------------------


def test_specialize_compiles_sizes_in_on_request() -> None:
    t = run("merge_attn_states", "specialize")
    assert "uint NUM_HEADS_CT = 0, uint HEAD_SIZE_CT = 0>" in t.source
    assert (
        "const uint num_heads_rt,\n                                         const uint head_size_rt) {\n"
        "  // cutune: sizes compiled in as constants when specialised (0 = the run-time argument)\n"
        "  const uint num_heads = NUM_HEADS_CT > 0 ? NUM_HEADS_CT : num_heads_rt;\n"
        "  const uint head_size = HEAD_SIZE_CT > 0 ? HEAD_SIZE_CT : head_size_rt;\n" in t.source
    )
    p = t.space.param("SPECIALIZE_HEAD_SIZE")
    assert (p.values, p.default, p.binding, p.arg) == ((False, True), False, Binding.SPECIALIZE, "head_size")
    assert refusal(t, "specialize") == (
        "num_tokens: nothing to gain: never used (even through a local) in a division, modulo or loop bound"
    )
    silu = run("silu_and_mul", "specialize")
    assert "const int d = D_CT > 0 ? D_CT : d_rt;" in silu.source
    assert [p.name for p in silu.space.params] == ["SPECIALIZE_D"]


def test_specialize_refusals() -> None:
    assert refusal(run("elementwise_if", "specialize"), "specialize") == (
        "alpha: a float, not an integral size; "
        "n: nothing to gain: never used (even through a local) in a division, modulo or loop bound"
    )
    assigned = "__global__ void k(float* x, int n) {\n  n -= 1;\n  for (int i = 0; i < n; ++i) x[i] = 0;\n}\n"
    assert refusal(run_text(assigned, "k", "specialize"), "specialize") == "n: assigned in the kernel (line 2)"


# -- vector_width and compile_flags ----------------------------------------------------------------


@pytest.mark.parametrize("shape", ["merge_attn_states", "silu_and_mul"])
def test_vector_width_is_detected_but_not_tuned_for_uint4_loads(shape: str) -> None:
    t = run(shape, "vector_width")
    assert str(refusal(t, "vector_width")) == (
        "loads are uint4 (16 bytes) — changing the pack width needs a different load type"
    )
    assert refusal(run("elementwise_if", "vector_width"), "vector_width") == (
        "no `16 / sizeof(T)` pack width in the kernel"
    )


def test_compile_flags_are_flag_parameters_without_source_changes() -> None:
    model, _ = load("elementwise_if")
    t = run("elementwise_if", "compile_flags")
    assert t.source == model.text
    fast, regs = t.space.param("FAST_MATH"), t.space.param("MAXRREGCOUNT")
    assert (fast.binding, fast.flag, fast.default) == (Binding.FLAG, "--use_fast_math", False)
    assert (regs.flag, regs.values[0], regs.default) == ("-maxrregcount={}", 0, 0)


def test_extern_c_kernels_take_no_template_parameters() -> None:
    text = (
        'extern "C" __global__ void k(float* x, int n) {\n'
        "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "#pragma unroll 4\n  for (int j = 0; j < 8; ++j) if (i < n) x[i] += j;\n}\n"
        "void f(float* x, int n) { k<<<(n + 127) / 128, 128>>>(x, n); }\n"
    )
    t = run_text(text, "k", "block_threads", "unroll")
    assert t.applied == ("block_threads",)  # a launch-only parameter needs no template
    assert refusal(t, "unroll") == 'an extern "C" kernel cannot take template parameters'
