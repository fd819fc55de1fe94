"""Kernels of the shapes production serving files have: launches inside #define, cub reductions over
blockDim.x, sizes used in callees, device functions as template arguments, torch-only headers and scalar
types, in-place arrays, and host launchers a spec is drafted from. Real tree-sitter, real nvcc."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from cutune.check import check_kernel
from cutune.cuda import SourceModel, parse_source
from cutune.cuda.access import index_arrays, pointer_roles
from cutune.cuda.extract import extract_kernel
from cutune.errors import SpecError
from cutune.gpu.nvcc import compile_resources
from cutune.project import open_kernel
from cutune.template.model import Binding
from cutune.template.spec import dump_kernel_spec, parse_spec
from cutune.template.spec.model import IncludeRules, Init, Role
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
    assert row.problem is not None and "torch/all.h" in row.problem


def test_a_dropped_include_leaves_the_unit_with_a_note() -> None:
    model = load(INCLUDES / "row_sum.cu")
    kept = extract_kernel(model, "row_sum_kernel")
    assert '#include "torch_utils.h"' in kept.source and not kept.notes  # it declares warp_sum: kept
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
    spec = dataclasses.replace(spec, grid=("64",))  # the host function's `rows` is no kernel argument
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
