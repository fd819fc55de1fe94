"""block_items: several items of a one-block-per-item kernel in one block, one per row of threads along y, and several
items a row one after another. Checked textually, through the launch it asks for at sizes that divide and that do
not, by compiling with nvcc and NVRTC, by the reasons it refuses, at a host launch site, and equal to the original
on the GPU."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.limits import limits_for
from cutune.project import open_kernel
from cutune.spec import load_spec
from cutune.template.model import Binding
from cutune.template.variants import TRANSFORMS, BlockItems, with_variants
from cutune.template.variants.block_items import ITEM, ITEMS, ITEMS_T
from cutune.template.variants.chain import chain, composed
from cutune.template.variants.host_launch import host_config
from cutune.template.variants.model import Launch
from cutune.template.variants.propose import propose_variants
from tests.cuda.test_extract import needs_nvrtc

from .compile import compile_both, measured_failures, name_expressions, variant_alone

DATA = Path(__file__).resolve().parents[2] / "data" / "template" / "variants"
FILE = DATA / "block_items.cu"
KERNEL = """
__global__ void k(float* __restrict__ out, const float* __restrict__ x, int d) {{
  {body}
}}
"""


# a per-item lambda capturing by default, as kernels that pass an element function to a row helper write it
LAMBDA = (
    "const float s = x[blockIdx.x];\n"
    "  auto put = [=](int i) { out[blockIdx.x * d + i] = s * i; };\n"
    "  for (int i = threadIdx.x; i < d; i += blockDim.x) put(i);"
)


def _model():  # type: ignore[no-untyped-def]
    return parse_source(FILE.read_text(), str(FILE))


def _refusal(body: str) -> str:
    with pytest.raises(TransformRefused) as caught:
        BlockItems().apply(parse_source(KERNEL.format(body=body)), "k", None)
    return caught.value.reason


def test_registered_after_the_others_so_they_keep_their_numbers() -> None:
    assert list(TRANSFORMS).index("block_items") == 5  # the sixth; group_items came after it


def test_the_block_index_becomes_the_item_of_the_threads_row() -> None:
    variant = BlockItems().apply(_model(), "dequant_group_kernel", None)
    assert f"const unsigned int {ITEM} = blockIdx.x * blockDim.y + threadIdx.y;" in variant.body
    assert f"const int64_t group = {ITEM};" in variant.body
    assert "blockIdx.x;" not in variant.body.split(ITEM, 2)[-1]  # no other read of the original block index
    assert "return;" in variant.body  # a thread past the end leaves alone, as before: no other thread waits on it
    # 1 and 1: the original launch
    assert [(p.name, p.default) for p in variant.params] == [(ITEMS, 1), (ITEMS_T, 1)]


def test_a_row_of_threads_runs_several_items_one_after_another() -> None:
    variant = BlockItems().apply(_model(), "dequant_group_kernel", None)
    looped, written = variant.body.split("  // cutune block_items: blockDim.y items per block", 1)
    assert f"if constexpr ({ITEMS_T} > 1) {{" in looped and "if (blockDim.y > 1) {" in looped
    # at each step the block's rows take consecutive items, as a block of rows alone does
    assert f"const unsigned int {ITEM} = (blockIdx.x * {ITEMS_T} + cutune_j) * blockDim.y + threadIdx.y;" in looped
    assert "continue;" in looped and looped.rstrip().endswith("return;\n    }\n  }")  # a past-the-end item is skipped
    # the body as written follows for a block of one row (a launch whose items do not divide), its return kept
    assert f"const int64_t group = {ITEM};" in written and "return;" in written and "continue" not in written
    assert variant.constraints == (f"{ITEMS_T} == 1 or {ITEMS} > 1",)  # the block's rows tell the kernel the launch
    bias = BlockItems().apply(_model(), "bias_rows_kernel", None).body
    # the original's grid is the launch's times the rows and the items a row
    assert f"r += (gridDim.x * blockDim.y * {ITEMS_T})" in bias and "r += (gridDim.x * blockDim.y))" in bias


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("__shared__ float s[32]; s[threadIdx.x] = x[blockIdx.x]; out[blockIdx.x] = s[0];", "shared memory"),
        ("for (int i = 0; i < d; ++i) { if (x[i] > 0.f) return; } out[blockIdx.x] = 0.f;", "a return in a loop"),
        ("if (d > 2) goto done; out[blockIdx.x] = 0.f; done: out[0] = 1.f;", "a label, written twice"),
        (
            "if (threadIdx.x >= d) return; float v = x[threadIdx.x];"
            " v += __shfl_xor_sync(0xffffffffu, v, 1); out[blockIdx.x] = v;",
            "a thread's return beside a warp's exchange",
        ),
    ],
)
def test_several_items_a_row_only_where_the_items_cannot_meet(body: str, why: str) -> None:
    variant = BlockItems().apply(parse_source(KERNEL.format(body=body)), "k", None)
    assert [p.name for p in variant.params] == [ITEMS] and not variant.constraints, why
    assert "cutune_j" not in variant.body, why


def test_a_moved_parameter_starts_each_item_of_a_row_where_the_launch_set_it() -> None:
    variant = BlockItems().apply(_model(), "moved_rows_kernel", None)
    looped = variant.body.split("  // cutune block_items: blockDim.y items per block", 1)[0]
    # saved once, set back before each item: the body's `src += row * cols` moves it from the row's start
    assert "const auto cutune_j_dst = dst;" in looped and "const auto cutune_j_src = src;" in looped
    first = looped.index("src = cutune_j_src;")
    assert looped.index("cutune_j < ITEMS_T") < first < looped.index("src += static_cast<int64_t>(row) * cols;")
    assert "cutune_j_scale" not in looped and "cutune_j_cols" not in looped  # only what the body writes


@pytest.mark.parametrize(
    "body",
    [
        "int* at = &d; *at = 0; out[blockIdx.x * d] = 0.f;",  # a write through the parameter's address
        "int& m = d; m += 1; out[blockIdx.x * m] = 0.f;",  # through a reference bound to it
    ],
)
def test_no_items_a_row_where_a_parameter_may_be_written_unseen(body: str) -> None:
    variant = BlockItems().apply(parse_source(KERNEL.format(body=body)), "k", None)
    assert [p.name for p in variant.params] == [ITEMS] and "cutune_j" not in variant.body


def test_a_lambdas_own_return_stays_one() -> None:
    body = "auto f = [=](int i) { if (i < 0) return 0.f; return x[i]; };\n  out[blockIdx.x] = f(threadIdx.x);"
    variant = BlockItems().apply(parse_source(KERNEL.format(body=body)), "k", None)
    assert ITEMS_T in {p.name for p in variant.params}
    assert variant.body.count("return 0.f;") == 2 and "continue" not in variant.body


def test_the_grid_size_counts_the_items_of_the_original_launch() -> None:
    variant = BlockItems().apply(_model(), "bias_rows_kernel", None)
    assert f"for (int r = {ITEM}; r < rows; r += (gridDim.x * blockDim.y))" in variant.body


def test_the_launch_packs_items_only_where_they_divide_and_the_block_fits() -> None:
    spec = load_spec(DATA / "block_items.tune.toml").kernel("token_quant_kernel")
    model = _model()
    variant = BlockItems().apply(model, "token_quant_kernel", spec)
    assert variant.launch is not None and "% warp_size == 0" in variant.launch.block[1]  # it shuffles
    template, combined = with_variants(model, "token_quant_kernel", [variant], spec)
    assert combined is not None
    names = limits_for("sm_90").as_names()

    def launch(tokens: int, items: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        config = {**names, "num_tokens": tokens, "hidden": 64, "VARIANT": 1, ITEMS: items, ITEMS_T: 1}
        grid, block, _ = combined.launch(config)
        return grid, block

    assert launch(4096, 8) == ((512, 1, 1), (32, 8, 1))
    assert launch(6, 2) == ((3, 1, 1), (32, 2, 1))
    assert launch(6, 4) == ((6, 1, 1), (32, 1, 1))  # 6 tokens do not split in 4s: the original launch
    assert launch(4096, 1) == ((4096, 1, 1), (32, 1, 1))
    assert template.space.default()[ITEMS] == 1 and template.space.default()[ITEMS_T] == 1

    def looped(tokens: int, items: int, each: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        config = {**names, "num_tokens": tokens, "hidden": 64, "VARIANT": 1, ITEMS: items, ITEMS_T: each}
        grid, block, _ = combined.launch(config)
        return grid, block

    assert looped(4096, 4, 2) == ((512, 1, 1), (32, 4, 1))  # 4 rows of 2 items each a block
    assert looped(4096, 8, 8) == ((64, 1, 1), (32, 8, 1))
    assert looped(12, 2, 4) == ((12, 1, 1), (32, 1, 1))  # 12 tokens do not split in 8s: the original launch
    assert looped(12, 2, 2) == ((3, 1, 1), (32, 2, 1))


def test_a_block_at_the_thread_limit_stays_one_item() -> None:
    variant = BlockItems().apply(
        parse_source(KERNEL.format(body="out[blockIdx.x * d + threadIdx.x] = 0.f;")), "k", None
    )
    spec = replace(load_spec(DATA / "block_items.tune.toml").kernel("token_quant_kernel"), block=("512",))
    _, combined = with_variants(parse_source(KERNEL.format(body="")), "k", [variant], spec)
    assert combined is not None
    names = {**limits_for("sm_90").as_names(), "num_tokens": 64, "hidden": 8, "VARIANT": 1}
    assert combined.launch({**names, ITEMS: 2, ITEMS_T: 1})[1] == (512, 2, 1)
    assert combined.launch({**names, ITEMS: 4, ITEMS_T: 1})[1] == (512, 1, 1)


def test_a_literal_launch_bound_caps_the_packed_block() -> None:
    source = KERNEL.format(body="out[blockIdx.x * d + threadIdx.x] = 0.f;").replace(
        "__global__ void", "__global__ void __launch_bounds__(256)"
    )
    variant = BlockItems().apply(parse_source(source), "k", None)
    assert variant.launch is not None and "* ITEMS_Y <= 256" in variant.launch.block[1]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("out[blockIdx.x] = __syncthreads_or(x[threadIdx.x] > 0.f);", "cooperate through __syncthreads_or"),
        (
            "if (x[blockIdx.x] > 0.f) { __syncthreads(); }",
            "a barrier (line 3) is reached or not by `x[blockIdx.x]>0.f`",
        ),
        ("for (int i = 0; i < d; ++i) { if (i == blockIdx.x) break; __syncthreads(); }", "a `break` (line 3)"),
        ("const int n = blockIdx.x % 3; for (int i = 0; i < n; ++i) __syncthreads();", "by `i<n`"),
        ("if (blockIdx.x >= d) return; __syncthreads(); out[blockIdx.x] = 0.f;", "a `return` (line 3)"),
        ("int n = 1; if (blockIdx.x > 2) n = 2; for (int i = 0; i < n; ++i) __syncthreads();", "by `i<n`"),
        (
            "float2 m; m.x = x[blockIdx.x]; if (m.x > 0.f) { __syncthreads(); } out[blockIdx.x] = m.x;",
            "a barrier (line 3) is reached or not by `m.x>0.f`",  # a field set from memory: the local varies
        ),
        ("__shared__ float a[4], b[4]; a[0] = b[0] = x[blockIdx.x];", "declares several names or a value"),
        ("out[blockIdx.x] = blockReduceSum(x[threadIdx.x]);", "calls blockReduceSum (line 3), defined elsewhere"),
        ("auto f = [&]() { __syncthreads(); }; f(); out[blockIdx.x] = 0.f;", "has a lambda (line 3)"),
        ("out[blockIdx.x * 4 + threadIdx.y] = 0.f;", "uses threadIdx.y (line 3): the block has rows already"),
        ("for (int i = threadIdx.x; i < d; i += blockDim.x) out[i] = x[i];", "does not read blockIdx.x"),
        (
            "for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < d; i += blockDim.x * gridDim.x) out[i] = 0.f;",
            "grid-stride",
        ),
        ("const uint3 b = blockIdx; out[b.x] = 0.f;", "reads blockIdx whole"),
        ("const int cutune_item = 0; out[blockIdx.x + cutune_item] = 0.f;", "already names something cutune_item"),
        (
            "const float s = x[0]; auto put = [s, out](int i) { out[blockIdx.x * 4 + i] = s; }; put(threadIdx.x);",
            "a lambda reads blockIdx.x (line 3) but captures only what it names",
        ),
    ],
)
def test_refuses_where_the_items_of_one_block_would_meet(body: str, reason: str) -> None:
    assert reason in _refusal(body)


def test_a_lambda_is_rewritten_with_the_body_and_captures_the_item_by_default() -> None:
    variant = BlockItems().apply(parse_source(KERNEL.format(body=LAMBDA)), "k", None)
    assert f"out[{ITEM} * d + i] = s * i;" in variant.body and f"x[{ITEM}]" in variant.body


@pytest.mark.nvcc
@needs_nvrtc
def test_a_kernel_with_a_lambda_compiles_with_its_items_per_block(tmp_path: Path) -> None:
    model = parse_source(KERNEL.format(body=LAMBDA))
    template, _ = with_variants(model, "k", [BlockItems().apply(model, "k", None)], None)
    entries, lowered = compile_both(template, ["k<1>"], tmp_path)
    assert len(lowered) == 1 and set(lowered.values()) <= set(entries)


def test_refuses_a_helper_that_reads_the_block_index_itself() -> None:
    with pytest.raises(TransformRefused, match="calls flat_block, which reads the block index"):
        BlockItems().apply(_model(), "helper_index_kernel", None)
    source = "__device__ float total(float v) { __shared__ float s; s = v; __syncthreads(); return s; }\n"
    with pytest.raises(TransformRefused, match="calls total, which makes the threads of a block cooperate"):
        BlockItems().apply(parse_source(source + KERNEL.format(body="out[blockIdx.x] = total(x[0]);")), "k", None)


def test_each_item_gets_its_own_copy_of_the_shared_arrays() -> None:
    variant = BlockItems().apply(_model(), "row_sum_kernel", None)
    assert "__shared__ float cutune_items_partial[ITEMS_Y][32];" in variant.body
    assert "auto& partial = cutune_items_partial[threadIdx.y];" in variant.body
    assert variant.params[0].binding is Binding.TEMPLATE  # the arrays' first size: a compile-time count
    scalar = KERNEL.format(
        body="__shared__ float m; if (threadIdx.x == 0) m = x[blockIdx.x]; __syncthreads(); out[0] = m;"
    )
    body = BlockItems().apply(parse_source(scalar), "k", None).body
    assert "__shared__ float cutune_items_m[ITEMS_Y];" in body and "auto& m = cutune_items_m[threadIdx.y];" in body
    # a barrier in a loop whose count every item shares, and exits on the thread's own index, are reached alike
    tile = BlockItems().apply(_model(), "tile_dot_kernel", None)
    assert "__shared__ float cutune_items_tile[ITEMS_Y][64];" in tile.body
    exits = KERNEL.format(
        body="__shared__ float s[32]; if (threadIdx.x >= 32) return; s[threadIdx.x] = x[blockIdx.x];"
        " __syncthreads(); out[blockIdx.x] = s[0];"
    )
    assert "cutune_items_s" in BlockItems().apply(parse_source(exits), "k", None).body
    # a cast or integer arithmetic of what every item shares is shared too
    cast = KERNEL.format(
        body="__shared__ float s[32]; for (int i = 0; i < min(static_cast<int>(d), 4); ++i) { s[threadIdx.x % 32] = "
        "x[blockIdx.x]; __syncthreads(); } out[blockIdx.x] = s[0];"
    )
    assert "cutune_items_s" in BlockItems().apply(parse_source(cast), "k", None).body


def test_refuses_shared_memory_declared_outside_the_kernel() -> None:
    source = "__shared__ float stage[64];\n// __shared__ float x;\n" + KERNEL.format(
        body="stage[threadIdx.x] = x[blockIdx.x]; __syncthreads(); out[blockIdx.x] = stage[0];"
    )
    with pytest.raises(TransformRefused, match="reads stage, shared memory declared outside any function"):
        BlockItems().apply(parse_source(source), "k", None)


def test_refuses_a_launch_bound_it_cannot_compare() -> None:
    source = (
        "template <int T> __global__ void __launch_bounds__(T) k(float* o) { o[blockIdx.x * T + threadIdx.x] = 0; }"
    )
    with pytest.raises(TransformRefused, match="caps the block at a count the launch cannot compare"):
        BlockItems().apply(parse_source(source), "k", None)


def test_a_child_reading_one_axis_of_its_parents_launch_gets_that_axis() -> None:
    parent = Launch(grid=("{grid}", "SPLIT"), block=("{block} / 2",))
    child = Launch(grid=("{grid}",), block=("{block}", "{grid.x} % 2 + {block.x}"))
    assert composed(parent, child) == Launch(
        grid=("({grid})", "SPLIT"), block=("({block} / 2)", "({grid.x}) % 2 + ({block.x} / 2)")
    )


def test_the_launch_is_written_at_a_host_launch_site() -> None:
    model = _model()
    variant = BlockItems().apply(model, "token_quant_kernel", None)
    assert variant.launch is not None
    site = next(s for s in model.launches if s.kernel == "token_quant_kernel")
    grid, block = host_config(variant.launch, site, [ITEMS, ITEMS_T], lambda p: f"cfg::{p}")[:2]
    rows = (
        "((((dim3(tokens).x % (cfg::ITEMS_Y * cfg::ITEMS_T)) == 0) && ((dim3(32).x * cfg::ITEMS_Y) <= 1024) && "
        "((dim3(32).x % 32) == 0)) ? cfg::ITEMS_Y : 1)"
    )
    each = f"(({rows} > 1) ? ({rows} * cfg::ITEMS_T) : 1)"
    assert grid == f"dim3((dim3(tokens).x / {each}), dim3(tokens).y, dim3(tokens).z)"
    assert block == f"dim3(dim3(32).x, {rows})"


@pytest.mark.nvcc
@needs_nvrtc
def test_the_variants_compile_with_nvcc_and_nvrtc(tmp_path: Path) -> None:
    model = _model()
    spec = load_spec(DATA / "block_items.tune.toml").kernel("token_quant_kernel")
    for kernel in (
        "token_quant_kernel",
        "bias_rows_kernel",
        "moved_rows_kernel",
        "dequant_group_kernel",
        "row_sum_kernel",
        "tile_dot_kernel",
        "staged_reverse_kernel",
    ):
        variant = BlockItems().apply(model, kernel, None)
        template, _ = with_variants(model, kernel, [variant], None)
        if kernel == "dequant_group_kernel":  # the template arguments: out_t, VARIANT, ITEMS_T
            expressions = ["dequant_group_kernel<half, 1, 1>", "dequant_group_kernel<half, 1, 4>"]
        else:  # the shared arrays' kernels at several items per block (a template argument there)
            configs = (
                [{"VARIANT": 1}, {"VARIANT": 1, ITEMS: 2, ITEMS_T: 8}]
                if kernel in ("token_quant_kernel", "bias_rows_kernel", "moved_rows_kernel")
                else [
                    {"VARIANT": 1, "ITEMS_Y": 1},
                    {"VARIANT": 1, "ITEMS_Y": 4},
                ]
            )
            expressions = name_expressions(template, replace(spec, kernel=kernel, template_args={}), configs)
        entries, lowered = compile_both(template, expressions, tmp_path, FILE)
        assert len(lowered) == len(expressions) and set(lowered.values()) <= set(entries), kernel


@pytest.mark.gpu
@pytest.mark.parametrize(
    "kernel",
    [
        "token_quant_kernel",
        "bias_rows_kernel",
        "moved_rows_kernel",
        "row_sum_kernel",
        "tile_dot_kernel",
        "staged_reverse_kernel",
    ],
)
def test_the_variant_equals_the_original_on_the_gpu(kernel: str) -> None:
    ctx = open_kernel(FILE, kernel)
    spec = ctx.require_spec()
    job = variant_alone(ctx, kernel, BlockItems().apply(ctx.template_model, kernel, spec))
    # every ITEMS_Y (× ITEMS_T, where a row may run several) measured at both sizes (6 tokens and 1000 rows fall back
    # to one item per block), each equal
    passed, failed = measured_failures(job, spec, {"VARIANT", ITEMS, ITEMS_T})
    assert passed >= (13 if kernel in ("token_quant_kernel", "bias_rows_kernel", "moved_rows_kernel") else 4), failed
    assert not failed, failed


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("own", "wrong"),
    [
        # planted wrong: every step of a row runs the row's first item (the others are never written)
        (f"(blockIdx.x * {ITEMS_T} + cutune_j) * blockDim.y", f"(blockIdx.x * {ITEMS_T}) * blockDim.y"),
        # planted wrong: the grid of the launch, not the original's (a persistent loop's stride)
        (f"(gridDim.x * blockDim.y * {ITEMS_T})", "(gridDim.x * blockDim.y)"),
        # planted wrong: a moved pointer not set back, so each item moves on from the last one's row
        ("        src = cutune_j_src;\n", ""),
    ],
)
def test_a_row_of_threads_running_the_wrong_items_is_caught_on_the_gpu(own: str, wrong: str) -> None:
    kernel = "moved_rows_kernel" if "cutune_j_src" in own else "bias_rows_kernel"
    ctx = open_kernel(FILE, kernel)
    spec = ctx.require_spec()
    variant = BlockItems().apply(ctx.template_model, kernel, spec)
    planted = replace(variant, body=variant.body.replace(own, wrong))
    assert planted.body != variant.body
    passed, failed = measured_failures(variant_alone(ctx, kernel, planted), spec, {"VARIANT", ITEMS, ITEMS_T})
    assert failed and all("ITEMS_T': 1," not in f for f in failed), (passed, failed)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("kernel", "own", "shared"),
    [
        # planted wrong: every item of a block uses the first item's partials
        ("row_sum_kernel", "cutune_items_partial[threadIdx.y]", "cutune_items_partial[0]"),
        # planted wrong: every item stages its row at the start of the block's dynamic shared memory
        ("staged_reverse_kernel", "cutune_item_dynamic(cutune_items_staged)", "cutune_items_staged"),
    ],
)
def test_items_sharing_one_copy_of_their_shared_memory_are_caught_on_the_gpu(
    kernel: str, own: str, shared: str
) -> None:
    ctx = open_kernel(FILE, kernel)
    spec = ctx.require_spec()
    variant = BlockItems().apply(ctx.template_model, kernel, spec)
    wrong = replace(variant, body=variant.body.replace(own, shared))
    assert wrong.body != variant.body
    passed, failed = measured_failures(variant_alone(ctx, kernel, wrong), spec, {"VARIANT", "ITEMS_Y"})
    assert failed and all("ITEMS_Y': 1" not in f for f in failed), (passed, failed)


def test_refuses_a_macro_or_inline_ptx_that_reads_the_block_index() -> None:
    source = "#define ROW (blockIdx.x * 2)\n" + KERNEL.format(body="out[ROW + blockIdx.x] = 0.f;")
    with pytest.raises(TransformRefused, match="uses the macro ROW, which reads the block index"):
        BlockItems().apply(parse_source(source), "k", None)
    ptx = 'unsigned b; asm("mov.u32 %0, %%ctaid.x;" : "=r"(b)); out[b + blockIdx.x] = 0.f;'
    assert "inline PTX reads the block's place" in _refusal(ptx)


def test_each_item_gets_its_slice_of_the_dynamic_shared_memory() -> None:
    variant = BlockItems().apply(_model(), "staged_reverse_kernel", None)
    assert "extern __shared__ float cutune_items_staged[];" in variant.body
    assert "auto& staged = cutune_item_dynamic(cutune_items_staged);" in variant.body
    assert "%%dynamic_smem_size" in variant.helpers and "threadIdx.y * (cutune_bytes / blockDim.y)" in variant.helpers
    # the launch gives every item the original's bytes rounded up to 128, as many times as the block has items
    assert variant.launch is not None and variant.launch.shared_mem.startswith("round_up({shared_mem}, 128) * (")
    assert variant.launch.shared_mem.endswith(variant.launch.block[1])
    # a launch's dynamic shared memory that the body never declares is left as it is
    source = KERNEL.format(body="out[blockIdx.x] = x[threadIdx.x];") + (
        "void run(float* o, const float* x, int d) { k<<<64, 128, 512>>>(o, x, d); }\n"
    )
    plain = BlockItems().apply(parse_source(source), "k", None)
    assert plain.launch is not None and plain.launch.shared_mem == "{shared_mem}" and not plain.helpers


HEAD = "head_softmax_kernel"


def _head_variants():  # type: ignore[no-untyped-def]
    ctx = open_kernel(FILE, HEAD)
    spec = ctx.require_spec()
    variants, _ = propose_variants(ctx.template_model, HEAD, spec)
    return ctx, spec, {v.name: v for v in variants}


def test_chains_onto_row_reduce_where_that_cannot_put_rows_on_y_itself() -> None:
    _, _, variants = _head_variants()
    chained = variants["row_reduce_block_items"]
    assert chained.provenance.parent == "row_reduce" and {p.name for p in chained.params} >= {"ROW_THREADS", ITEMS}
    body = chained.body
    assert f"const unsigned int cutune_row = {ITEM};" in body
    # each item its own slots for the reductions, passed to the helper as they are (it adds no row offset itself)
    assert f"__shared__ float cutune_items_cutune_red0_0[{ITEMS}]" in body
    assert "auto& cutune_red0_0 = cutune_items_cutune_red0_0[threadIdx.y];" in body
    assert "cutune_rr_allreduce<ROW_THREADS>(m, cutune_rr_max{}, cutune_red0_0);" in body
    assert "auto& head_smem = cutune_item_dynamic(cutune_items_head_smem);" in body
    # row_reduce's own variant names no y axis: without rows of its own, the block is 1-D
    assert "threadIdx.y" not in variants["row_reduce"].body
    # each guarded helper once, though the parent's and the child's helpers both come with the chained variant
    assert chained.helpers.count("#ifndef CUTUNE_ROW_REDUCE_HELPERS") == 1
    assert chained.helpers.count("#ifndef CUTUNE_ITEM_DYNAMIC_SHARED") == 1
    assert chained.launch is not None and chained.launch.block[0] == "(ROW_THREADS)"


def test_refuses_a_reduction_that_items_may_reach_or_not() -> None:
    ctx, spec, variants = _head_variants()
    parent = variants["row_reduce"]
    # planted wrong: the first reduction only for even blocks, which an item's row would decide differently
    call = "m = cutune_rr_allreduce<ROW_THREADS>(m, cutune_rr_max{}, cutune_red0_0);"
    assert call in parent.body
    wrong = replace(parent, body=parent.body.replace(call, f"if (blockIdx.x % 2 == 0) {{ {call} }}"))
    with pytest.raises(TransformRefused, match=r"a barrier \(line \d+\) is reached or not by `blockIdx.x%2==0`"):
        chain(wrong, BlockItems(), ctx.template_model, HEAD, spec)


@pytest.mark.nvcc
@needs_nvrtc
def test_the_chained_variant_compiles_with_nvcc_and_nvrtc(tmp_path: Path) -> None:
    ctx, spec, variants = _head_variants()
    template, combined = with_variants(ctx.template_model, HEAD, [variants["row_reduce_block_items"]], spec)
    assert combined is not None
    configs = [{"VARIANT": 1, ITEMS: 1}, {"VARIANT": 1, ITEMS: 4, "ROW_THREADS": 64}]
    expressions = name_expressions(template, combined, configs)
    entries, lowered = compile_both(template, expressions, tmp_path, FILE)
    assert len(lowered) == len(expressions) and set(lowered.values()) <= set(entries)


@pytest.mark.gpu
def test_the_chained_variant_equals_the_original_on_the_gpu() -> None:
    ctx, spec, variants = _head_variants()
    job = variant_alone(ctx, HEAD, variants["row_reduce_block_items"])
    # every ITEMS_Y × threads a row at both sizes (6 tokens fall back to one item a block), each equal
    passed, failed = measured_failures(job, spec, {"VARIANT", ITEMS, "ROW_THREADS"})
    assert passed >= 8 and not failed, failed


@pytest.mark.gpu
def test_items_sharing_one_copy_of_the_reduction_slots_are_caught_on_the_gpu() -> None:
    ctx, spec, variants = _head_variants()
    chained = variants["row_reduce_block_items"]
    # planted wrong: every item of a block reduces through the first item's slots
    own = "cutune_items_cutune_red1_0[threadIdx.y]"
    wrong = replace(chained, body=chained.body.replace(own, "cutune_items_cutune_red1_0[0]"))
    assert wrong.body != chained.body
    passed, failed = measured_failures(variant_alone(ctx, HEAD, wrong), spec, {"VARIANT", ITEMS})
    assert failed and all("ITEMS_Y': 1," not in f for f in failed), (passed, failed)
