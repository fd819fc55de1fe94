"""Kernels of the shapes production serving files have: launches inside #define, cub reductions over
blockDim.x, sizes used in callees, device functions as template arguments, torch-only headers and scalar
types, in-place arrays, and host launchers a spec is drafted from. Real tree-sitter, real nvcc."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from cutune.check import check_kernel
from cutune.cuda import SourceModel, parse_source
from cutune.cuda.access import index_arrays, pointer_roles
from cutune.cuda.extract import extract_kernel
from cutune.errors import SpecError
from cutune.gpu.compile import compile_resources
from cutune.project import open_kernel
from cutune.spec import dump_kernel_spec, parse_spec
from cutune.spec.model import IncludeRules, Init, Role
from cutune.template.expr import compile_expr
from cutune.template.model import Binding, Space
from cutune.template.templatize import templatize

ROOT = Path(__file__).resolve().parents[2]
VLLM = ROOT / "samples" / "vllm_style"
DATA = Path(__file__).resolve().parent / "data"


def load(path: Path) -> SourceModel:
    return parse_source(path.read_text(encoding="utf-8"), str(path))


def test_launch_inside_a_define_is_found() -> None:
    model = load(VLLM / "layernorm_kernels.cu")
    (site,) = model.launches_of("fused_add_rms_norm_kernel")
    assert site.macro == "LAUNCH_FUSED_ADD_RMS_NORM"
    assert (site.grid, site.block, site.template_args) == ("grid", "block", ("scalar_t",))
    (plain,) = model.launches_of("rms_norm_kernel")
    assert plain.macro is None and plain.host_function == "rms_norm"


def test_block_threads_through_a_macro_launch_and_a_cub_reduction_over_blockdim() -> None:
    """`dim3 block(std::min(hidden_size, 1024))` where the macro is used; `BlockReduce<float, 1024>` reduces
    blockDim.x items, so any block up to 1024 threads is valid."""
    model = load(VLLM / "layernorm_kernels.cu")
    tpl = templatize(model, "fused_add_rms_norm_kernel")
    assert "block_threads" in tpl.applied, tpl.refused
    param = next(p for p in tpl.space.params if p.name == "BLOCK_THREADS")
    assert param.default == 1024
    assert "BLOCK_THREADS <= 1024" in tpl.space.constraints
    assert "dim3 block(std::min(hidden_size, vllm::fused_add_rms_norm_kernel_tuning::BLOCK_THREADS));" in tpl.source
    assert tpl.source.count("dim3 block(std::min(hidden_size, 1024));") == 1  # rms_norm's launcher unchanged


def test_locals_declared_inside_the_macro_body_resolve() -> None:
    tpl = templatize(load(VLLM / "activation_kernels.cu"), "act_and_mul_kernel")
    assert "block_threads" in tpl.applied, tpl.refused
    assert "dim3 block(std::min(d, vllm::act_and_mul_kernel_tuning::BLOCK_THREADS));" in tpl.source


def test_cub_reduction_of_exactly_the_block_refuses_with_the_reason() -> None:
    tpl = templatize(load(DATA / "block_reduce_exact.cu"), "row_max")
    reason = next(r.reason for r in tpl.refused if r.recipe == "block_threads")
    assert "`cub::BlockReduce<float, 256>` (line 5) works on exactly 256 threads" in reason
    assert "blockDim.x" in reason


def test_specialize_counts_sizes_divided_in_a_callee() -> None:
    tpl = templatize(load(DATA / "callee_size.cu"), "row_norm")
    assert "SPECIALIZE_HIDDEN" in [p.name for p in tpl.space.params], tpl.refused


@pytest.mark.nvcc
def test_device_function_passed_as_template_argument_is_extracted_and_compiles() -> None:
    unit = extract_kernel(
        load(VLLM / "activation_kernels.cu"),
        "act_and_mul_kernel",
        instantiations=["act_and_mul_kernel<c10::BFloat16, vllm::silu_kernel<c10::BFloat16>>"],
    )
    assert "T silu_kernel(const T& x)" in unit.source
    assert "gelu_tanh_kernel" not in unit.source  # only the one named
    usage = compile_resources(unit.source, include_dirs=unit.include_dirs, kernel=unit.kernel)
    assert usage.registers > 0


@pytest.mark.nvcc
def test_torch_scalar_types_compile_without_torch_and_say_so() -> None:
    unit = extract_kernel(
        load(VLLM / "layernorm_kernels.cu"),
        "fused_add_rms_norm_kernel",
        instantiations=["fused_add_rms_norm_kernel<at::Half>"],
    )
    # the torch includes are gone, and the CUDA headers they supplied are there
    assert "torch/all.h" not in unit.source and "#include <cuda_fp16.h>" in unit.source
    assert any("at::Half" in note for note in unit.notes)
    assert compile_resources(unit.source, include_dirs=unit.include_dirs, kernel=unit.kernel).registers > 0


@pytest.mark.nvcc
def test_project_header_that_needs_torch_is_dropped_when_the_kernel_needs_nothing_from_it() -> None:
    model = load(DATA / "project" / "scaled_square.cu")
    unit = extract_kernel(model, "scaled_square", include_dirs=[str(DATA / "project" / "include")])
    assert '#include "device_math.cuh"' in unit.source
    assert '#include "host_utils.h"' not in unit.source
    assert "using namespace serving_host" not in unit.source  # its namespace went with the header
    assert unit.notes == ('dropped #include "host_utils.h": the kernel uses nothing it declares',)
    assert compile_resources(unit.source, include_dirs=unit.include_dirs, kernel=unit.kernel).registers > 0


def test_pointer_roles_from_the_body() -> None:
    layernorm = load(VLLM / "layernorm_kernels.cu")
    assert pointer_roles(layernorm, layernorm.kernel("fused_add_rms_norm_kernel")) == {
        "input": "inout",
        "residual": "inout",
        "weight": "in",
    }
    assert pointer_roles(layernorm, layernorm.kernel("rms_norm_kernel")) == {
        "out": "out",
        "input": "in",
        "weight": "in",
    }
    rope = load(DATA / "rotary_inplace.cu")  # written through a device function the kernel calls
    assert pointer_roles(rope, rope.kernel("rotary_embedding_kernel")) == {
        "positions": "in",
        "query": "inout",
        "key": "inout",
        "cos_sin_cache": "in",
    }


def test_draft_reads_the_torch_launcher() -> None:
    """Shapes from size(i)/numel and `// [...]` comments, grid and block from dim3 locals in the macro, the
    dtype from the dispatch macro, the activation from the macro's argument: only sizes are left to fill in."""
    spec = open_kernel(VLLM / "activation_kernels.cu", "act_and_mul_kernel").drafted_spec()
    assert spec.template_args == {"scalar_t": "__nv_bfloat16", "ACT_FN": "vllm::silu_kernel<__nv_bfloat16>"}
    assert (spec.grid, spec.block) == (("num_tokens",), ("min(d, BLOCK_THREADS)",))
    args = {a.name: a for a in spec.args}
    assert (args["out"].shape, args["out"].role, args["out"].dtype) == (("num_tokens", "d"), Role.OUT, "bfloat16")
    assert args["input"].shape == ("num_tokens", "2", "d")
    assert set(spec.sizes[0]) == {"num_tokens", "d"}
    assert not any("TODO" in str(v) for v in (*spec.template_args.values(), *spec.grid, *spec.block))


def test_draft_roles_and_host_sizes_for_in_place_kernels() -> None:
    spec = open_kernel(VLLM / "layernorm_kernels.cu", "fused_add_rms_norm_kernel").drafted_spec()
    args = {a.name: a for a in spec.args}
    assert args["residual"].role is Role.INOUT and args["input"].role is Role.INOUT
    assert args["weight"].shape == ("hidden_size",)
    assert args["epsilon"].value == "1e-6"
    assert spec.block == ("min(hidden_size, BLOCK_THREADS)",)
    rope = open_kernel(DATA / "rotary_inplace.cu", "rotary_embedding_kernel").drafted_spec()
    assert rope.template_args == {"scalar_t": "__nv_bfloat16"}  # AT_DISPATCH_..._AND2(Half, BFloat16)
    assert {a.name: a.role for a in rope.args if a.shape}["query"] is Role.INOUT


INCLUDES = DATA / "includes"


@pytest.mark.nvcc
def test_a_spec_substitutes_a_header_that_pulls_in_torch(tmp_path: Path) -> None:
    """`includes = { substitute = { "torch_utils.h" = "device_utils.h" } }`: the device helper without torch."""
    for name in ("row_sum.cu", "row_sum.tune.toml", "torch_utils.h", "device_utils.h"):
        shutil.copy(INCLUDES / name, tmp_path)
    ctx = open_kernel(tmp_path / "row_sum.cu", "row_sum_kernel")
    assert ctx.spec is not None and ctx.spec.includes == IncludeRules((), {"torch_utils.h": "device_utils.h"})
    (row,) = check_kernel(ctx, limit=1, compiler="nvcc").rows
    assert row.feasible and row.usage is not None and row.usage.registers > 0, row.problem
    spec_file = tmp_path / "row_sum.tune.toml"
    spec_file.write_text(spec_file.read_text().replace("includes = ", "# includes = "))
    (row,) = check_kernel(open_kernel(tmp_path / "row_sum.cu", "row_sum_kernel"), limit=1, compiler="nvcc").rows
    # without torch, its header stands in for <torch/all.h> with CUDA's types only: the host code fails, saying so
    assert row.problem is not None and "torch/all.h" in row.problem


def test_a_dropped_include_leaves_the_unit_with_a_note() -> None:
    model = load(INCLUDES / "row_sum.cu")
    kept = extract_kernel(model, "row_sum_kernel")
    assert '#include "torch_utils.h"' in kept.source  # it declares warp_sum: kept
    assert all("stood in" in note or "installed headers" in note for note in kept.notes)  # the torch it includes
    unit = extract_kernel(model, "row_sum_kernel", drop_includes=["torch_utils.h"])
    assert "torch_utils.h" not in unit.source
    assert unit.notes == ('dropped #include "torch_utils.h": the spec\'s includes.drop',)


def test_includes_round_trip_through_the_spec_file_and_errors_name_the_key() -> None:
    text = (
        (INCLUDES / "row_sum.tune.toml")
        .read_text()
        .replace("includes = { substitute", 'includes = { drop = ["host_logging.h"], substitute')
    )
    spec = parse_spec(text, "row_sum.tune.toml").kernel("row_sum_kernel")
    assert spec.includes == IncludeRules(("host_logging.h",), {"torch_utils.h": "device_utils.h"})
    again = parse_spec(dump_kernel_spec(spec)).kernel("row_sum_kernel")
    assert again.includes == spec.includes
    with pytest.raises(SpecError, match="unknown key 'keep'") as caught:
        parse_spec(text.replace("drop =", "keep ="), "row_sum.tune.toml")
    assert caught.value.key == "kernel.row_sum_kernel.includes.keep"
    with pytest.raises(SpecError, match=r"torch_utils\.h is both dropped and substituted"):
        parse_spec(text.replace('"host_logging.h"', '"torch_utils.h"'), "row_sum.tune.toml")


@pytest.mark.nvcc
def test_an_overridable_macro_block_size_is_a_define_parameter(tmp_path: Path) -> None:
    """`#ifndef ROW_THREADS / #define ROW_THREADS 128`: tuned with -DROW_THREADS=, the source unchanged; the
    shared array it sizes follows (ptxas reports 4 bytes per thread)."""
    shutil.copy(DATA / "macro_block.cu", tmp_path)
    ctx = open_kernel(tmp_path / "macro_block.cu", "row_max_kernel")
    assert "block_threads" in ctx.template.applied, ctx.template.refused
    param = next(p for p in ctx.space.params if p.name == "ROW_THREADS")
    assert (param.binding, param.default) == (Binding.DEFINE, 128)
    assert ctx.template.source.count("ROW_THREADS") == ctx.model.text.count("ROW_THREADS")  # no rewrite
    spec = ctx.drafted_spec()
    assert spec.block == ("ROW_THREADS",)
    # the host function's `rows` is no kernel argument; only ROW_THREADS is searched (one nvcc run per value)
    spec = dataclasses.replace(spec, grid=("64",), space=Space((param,), ()))
    rows = check_kernel(dataclasses.replace(ctx, spec=spec), limit=64, compiler="nvcc").rows
    smem = {r.config["ROW_THREADS"]: r.usage.shared_bytes for r in rows if r.usage is not None}
    assert smem[128] == 512 and smem[256] == 1024 and smem[32] == 128, smem


def test_a_macro_block_size_without_ifndef_is_refused_with_the_reason() -> None:
    tpl = templatize(load(DATA / "macro_block.cu"), "fill_kernel")
    reason = next(r.reason for r in tpl.refused if r.recipe == "block_threads")
    assert "macro FIXED_THREADS (line 5), which is not inside `#ifndef FIXED_THREADS`" in reason


def test_index_arrays_follow_locals_computed_from_the_index() -> None:
    """`slot = slot_mapping[t]; block_idx = slot / block_size; dst = (...) * n; cache[dst + i] = ...`."""
    model = load(ROOT / "samples" / "kv_cache_write.cu")
    found = index_arrays(model, model.kernel("kv_cache_write_kernel"))
    assert found == {"slot_mapping": frozenset({"key_cache", "value_cache"})}
    model = load(DATA / "macro_block.cu")
    assert index_arrays(model, model.kernel("row_max_kernel")) == {}


def test_draft_of_a_slot_mapping_kernel_with_the_grid_written_as_a_tensor_size() -> None:
    spec = open_kernel(VLLM / "cache_kernels.cu", "reshape_and_cache_kernel").drafted_spec()
    args = {a.name: a for a in spec.args}
    assert args["slot_mapping"].init is Init.PERMUTATION and args["slot_mapping"].dtype == "int64"
    assert args["key"].init is Init.NORMAL
    # the caches keep the slots no token writes: read and written
    assert args["key_cache"].role is Role.INOUT and args["value_cache"].role is Role.INOUT
    assert spec.grid == ("num_tokens",)  # `<<<slot_mapping.size(0), ...>>>`, slot_mapping being [num_tokens]
    assert spec.template_args == {"scalar_t": "__nv_bfloat16"}


def test_draft_of_bool_arrays_and_scalars() -> None:
    spec = open_kernel(VLLM / "cache_kernels.cu", "apply_token_mask_kernel").drafted_spec()
    args = {a.name: a for a in spec.args}
    assert args["mask"].dtype == "bool" and args["mask"].role is Role.IN
    assert args["logits"].role is Role.INOUT  # written only where the mask says: the rest keeps its values
    assert (spec.grid, spec.block) == (("num_seqs",), ("CACHE_BLOCK_THREADS",))
    fill = open_kernel(DATA / "macro_block.cu", "fill_kernel").drafted_spec()
    negate = next(a for a in fill.args if a.name == "negate")
    assert (negate.dtype, negate.value) == ("bool", "true")


# -- a kernel's own template parameter as its block size ------------------------------------------------

BLOCKS = DATA / "template_block.cu"


def _nvcc_shared_bytes(tmp_path: Path, kernel: str, values: tuple[int, ...]) -> dict[object, int]:
    """Shared bytes per NUM_THREADS value, each compiled by nvcc from the templatized file (grid: 64 rows)."""
    shutil.copy(BLOCKS, tmp_path)
    ctx = open_kernel(tmp_path / BLOCKS.name, kernel)
    param = dataclasses.replace(ctx.space.param("NUM_THREADS"), values=values)
    spec = dataclasses.replace(ctx.drafted_spec(), grid=("64",), space=Space((param,)), constraints=())
    rows = check_kernel(dataclasses.replace(ctx, spec=spec), limit=len(values) + 1, compiler="nvcc").rows
    assert all(r.feasible for r in rows), [r.problem for r in rows]
    return {r.config["NUM_THREADS"]: r.usage.shared_bytes for r in rows if r.usage is not None}


def test_a_template_parameter_block_size_through_a_host_function_template() -> None:
    """`row_sum_kernel<T, NUM_THREADS><<<rows, NUM_THREADS>>>` in `launch_row_sum<T, NUM_THREADS>`, called as
    `launch_row_sum<float, 256>(...)`: the kernel's parameter is tuned, the call's literal becomes the struct's."""
    tpl = templatize(load(BLOCKS), "row_sum_kernel")
    assert {"block_threads", "launch_bounds"} <= set(tpl.applied), tpl.refused
    param = tpl.space.param("NUM_THREADS")
    assert (param.binding, param.default, param.values) == (Binding.TEMPLATE, 256, (32, 64, 128, 256, 512, 1024))
    assert "NUM_THREADS % 32 == 0" in tpl.space.constraints  # the kernel's static_assert
    assert "launch_row_sum<float, row_sum_kernel_tuning::NUM_THREADS>(out, in, rows, d, stream);" in tpl.source
    assert "__launch_bounds__(NUM_THREADS, MIN_BLOCKS) row_sum_kernel(" in tpl.source
    again = templatize(parse_source(tpl.source, str(BLOCKS)), "row_sum_kernel")
    assert again.source == tpl.source and again.space == tpl.space  # templatizing twice changes nothing


@pytest.mark.nvcc
def test_the_template_parameter_reaches_the_compile(tmp_path: Path) -> None:
    """cub's BlockReduce<float, NUM_THREADS> keeps one float per warp: nvcc reports more shared memory for
    more threads, so each configuration really instantiates the kernel with its block size."""
    smem = _nvcc_shared_bytes(tmp_path, "row_sum_kernel", (64, 1024))
    assert smem[1024] > smem[64] > 0, smem


def test_a_switch_over_literal_block_sizes_is_searched_among_its_cases() -> None:
    tpl = templatize(load(BLOCKS), "row_max_kernel")
    param = tpl.space.param("NUM_THREADS")
    assert (param.binding, param.values, param.default) == (Binding.TEMPLATE, (128, 512, 1024), 128)
    assert "dispatches 128, 512, 1024" in param.description
    assert tpl.source.count("row_max_kernel<float, 512><<<rows, 512, 0, stream>>>") == 1  # the dispatch stays
    assert "__launch_bounds__(NUM_THREADS, MIN_BLOCKS) row_max_kernel(" in tpl.source
    spec = open_kernel(BLOCKS, "row_max_kernel").drafted_spec()
    assert spec.block == ("NUM_THREADS",) and "NUM_THREADS" not in spec.template_args


@pytest.mark.nvcc
def test_every_dispatched_case_compiles(tmp_path: Path) -> None:
    smem = _nvcc_shared_bytes(tmp_path, "row_max_kernel", (128, 512, 1024))
    assert set(smem) == {128, 512, 1024} and smem[1024] > smem[128], smem


def test_a_dispatch_macro_instantiated_with_a_literal() -> None:
    """`#define LAUNCH_ROW_SCALE(THREADS) row_scale_kernel<float, THREADS><<<rows, THREADS, ...>>>(...)` used
    as `LAUNCH_ROW_SCALE(256);`: the use's argument becomes the struct's member."""
    tpl = templatize(load(BLOCKS), "row_scale_kernel")
    param = tpl.space.param("NUM_THREADS")
    assert (param.binding, param.default) == (Binding.TEMPLATE, 256)
    assert "LAUNCH_ROW_SCALE(row_scale_kernel_tuning::NUM_THREADS);" in tpl.source
    assert open_kernel(BLOCKS, "row_scale_kernel").drafted_spec().block == ("NUM_THREADS",)
    copy = templatize(load(BLOCKS), "row_copy_kernel").space.param("NUM_THREADS")  # LAUNCH_ROW_COPY(512 or 128)
    assert (copy.values, copy.default) == ((128, 512), 512)


def test_a_host_template_nothing_instantiates_with_a_literal_is_refused_with_the_reason() -> None:
    text = (
        "template <int N> __global__ void k(float* x) { x[threadIdx.x] = N; }\n"
        "template <int N> void launch(float* x) { k<N><<<1, N>>>(x); }\n"
        "template <int M> void outer(float* x) { launch<M>(x); }\n"
    )
    tpl = templatize(parse_source(text), "k", recipes=("block_threads",))
    (reason,) = [r.reason for r in tpl.refused if r.recipe == "block_threads"]
    assert reason == (
        "the block size `M` (line 3) is computed at run time: a parameter of the host function template outer "
        "that nothing here sets, with no literal to tune"
    )


# -- grids computed by host code ---------------------------------------------------------------------------

GRIDS = DATA / "grid_helpers.cu"


def _grid(kernel: str, **names: int) -> int:
    """The drafted spec's grid for `kernel`, evaluated at `names`."""
    (grid,) = open_kernel(GRIDS, kernel).drafted_spec().grid
    return int(compile_expr(grid).evaluate({"ITEMS_PER_THREAD": 1, **names}))


def test_a_capped_local_grid_is_a_launch_parameter() -> None:
    tpl = templatize(load(GRIDS), "scale_tokens_kernel")
    param = tpl.space.param("MAX_BLOCKS")
    assert (param.binding, param.default) == (Binding.LAUNCH, 256) and 4096 in param.values
    assert "const int blocks = std::min(num_tokens, scale_tokens_kernel_tuning::MAX_BLOCKS);" in tpl.source
    assert _grid("scale_tokens_kernel", num_tokens=1000, MAX_BLOCKS=256) == 256
    assert _grid("scale_tokens_kernel", num_tokens=100, MAX_BLOCKS=256) == 100
    again = templatize(parse_source(tpl.source, str(GRIDS)), "scale_tokens_kernel")
    assert again.source == tpl.source and again.space == tpl.space


def test_a_capped_ceil_div_follows_the_block_size_and_the_cap() -> None:
    tpl = templatize(load(GRIDS), "axpy_kernel")
    assert "std::min(ceil_div(n, axpy_kernel_tuning::BLOCK_THREADS), axpy_kernel_tuning::MAX_BLOCKS);" in tpl.source
    assert _grid("axpy_kernel", n=1 << 20, BLOCK_THREADS=256, MAX_BLOCKS=2048) == 2048
    assert _grid("axpy_kernel", n=1 << 20, BLOCK_THREADS=512, MAX_BLOCKS=4096) == 2048


def test_a_helper_function_grid_is_written_out_at_the_launch() -> None:
    """`static int num_blocks(int n) { return std::min((n + 255) / 256, 1024); }`: the launch gets the
    expression, its 255/256 following BLOCK_THREADS and its 1024 being MAX_BLOCKS; the helper stays."""
    tpl = templatize(load(GRIDS), "relu_kernel", recipes=("block_threads", "grid_size"))
    assert tpl.applied == ("block_threads", "grid_size") and tpl.space.param("MAX_BLOCKS").default == 1024
    ref = "relu_kernel_tuning::"
    assert (
        f"relu_kernel<<<std::min((n + ({ref}BLOCK_THREADS - 1)) / {ref}BLOCK_THREADS, {ref}MAX_BLOCKS), "
        f"{ref}BLOCK_THREADS, 0, stream>>>(y, x, n);"
    ) in tpl.source
    assert "static int num_blocks(int n) { return std::min((n + 255) / 256, 1024); }" in tpl.source
    assert _grid("relu_kernel", n=1 << 20, BLOCK_THREADS=128, MAX_BLOCKS=1024) == 1024
    assert _grid("relu_kernel", n=5000, BLOCK_THREADS=128, MAX_BLOCKS=1024) == 40


@pytest.mark.nvcc
def test_the_rewritten_host_code_compiles(tmp_path: Path) -> None:
    """Kernels and host launchers of the whole templatized file, through nvcc -c."""
    source = load(GRIDS).text
    for kernel in ("scale_tokens_kernel", "axpy_kernel", "relu_kernel"):
        source = templatize(parse_source(source, str(GRIDS)), kernel).source
    unit = tmp_path / "grid_helpers.cu"
    unit.write_text(source)
    run = subprocess.run(
        ["nvcc", "-arch=sm_90", "-std=c++17", "-c", str(unit), "-o", str(tmp_path / "grid_helpers.o")],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert source.count("_tuning::MAX_BLOCKS") == 3 and source.count("static constexpr int MAX_BLOCKS") == 3


@pytest.mark.parametrize(
    ("kernel", "reason"),
    [
        (
            "clamp_kernel",
            "the grid comes from the helper pick_blocks (line 15), which is more than one `return` expression: "
            "cutune cannot read its cap",
        ),
        (
            "fill_kernel",
            "the grid is capped at 65535 blocks, but the kernel does not read gridDim.x: it does not stride over "
            "the grid, so another cap would leave work undone or idle",
        ),
        ("row_sum_kernel", "no launch caps its grid (`std::min(blocks, 1024)` in host code or a helper)"),
    ],
)
def test_grid_size_refusals(kernel: str, reason: str) -> None:
    path = BLOCKS if kernel == "row_sum_kernel" else GRIDS
    tpl = templatize(load(path), kernel, recipes=("block_threads", "grid_size"))
    assert [r.reason for r in tpl.refused if r.recipe == "grid_size"] == [reason]
