"""row_reduce: the row-reduction rewrite read from real tree-sitter trees, checked textually, compiled with nvcc and
NVRTC through the combined template, refused with its reason where it cannot rewrite, and equal on the GPU."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from cutune.cuda.extract import extract_kernel
from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.gpu.registry import create_backend
from cutune.limits import limits_for
from cutune.project import open_kernel, tune_options
from cutune.spec import KernelSpec, load_spec
from cutune.template.model import Binding, Template
from cutune.template.templatize import templatize
from cutune.template.variants import TRANSFORMS, Combined, combine_all, propose_variants, with_variants
from cutune.template.variants.canonical import canonicalise
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.model import Variant
from cutune.template.variants.row_reduce import RowReduce
from cutune.tune.run import tune
from cutune.tune.space import Feasibility, feasible_configs
from tests.cuda.test_extract import needs_nvrtc, nvrtc_compiled

from .compile import compile_both, measured_failures, name_expressions, only_the_variant, variant_alone
from .emulated import COMPARED, emulated, emulated_unit

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "template" / "variants"
SAMPLES = ROOT / "samples"


def _sample(stem: str, kernel: str, sizes: tuple[dict[str, int], ...] = ()) -> tuple[Template, KernelSpec]:
    """The sample's recipes template with its row_reduce variant (at the spec's sizes, or at `sizes`)."""
    path = SAMPLES / f"{stem}.cu"
    model = parse_source(path.read_text(), str(path))
    base = templatize(model, kernel)
    base_model = parse_source(base.source, str(path))
    spec = load_spec(SAMPLES / f"{stem}.tune.toml").kernel(kernel)
    spec = replace(spec, sizes=sizes) if sizes else spec
    variant = RowReduce().apply(base_model, kernel, spec)
    template, combined = with_variants(base_model, kernel, [variant], spec, base=base)
    assert combined is not None
    return template, combined


def _data(file: str, kernel: str) -> tuple[Template, str]:
    """The data file's kernel with its row_reduce variant, read in its canonical form as templatize reads it."""
    path = DATA / file
    model = canonicalise(parse_source(path.read_text(), str(path)), kernel).model
    variant = RowReduce().apply(model, kernel, None)
    template, _ = with_variants(model, kernel, [variant], None)
    return template, variant.body


def test_registered_with_the_other_transforms() -> None:
    assert isinstance(TRANSFORMS["row_reduce"], RowReduce)


def test_rms_norm_sample_becomes_one_pass_over_registers_with_a_shuffle_all_reduce() -> None:
    template, spec = _sample("rms_norm", "rms_norm_kernel")
    source = template.source
    assert "constexpr int cutune_len_ct = HIDDEN_SIZE_CT;" in source  # the specialize recipe's constant
    assert "cutune_s0_cache[cutune_one_pass ? cutune_chunks : 1]" in source  # the row kept between loops
    assert "variance = cutune_rr_allreduce<ROW_THREADS>(variance, cutune_rr_sum{}, cutune_red0_0);" in source
    assert "float s_variance = rsqrtf(variance / hidden_size + epsilon);" in source  # every thread, no broadcast
    branch = source[source.index("VARIANT == 1") :]
    assert "BlockReduce" not in branch and "__syncthreads" not in branch.split("#endif")[-1]
    # rows of 4096 and 8192 elements fill a block each: one row per block, the spec's grid
    assert spec.grid == ("num_tokens",)
    assert spec.block == ("(ROW_THREADS) if VARIANT == 1 else (min(hidden_size, 1024))", "1")
    assert "const unsigned int cutune_row = blockIdx.x;" in branch
    names = {p.name for p in template.space.params}
    assert {"ROW_THREADS", "ROW_VEC", "SPECIALIZE_HIDDEN_SIZE"} <= names and "ROWS_PER_BLOCK" not in names
    assert template.space.param("ROW_VEC").values == (4, 8)  # 8- and 16-byte bf16 accesses
    # 128 threads hold a row of 8192 in registers (64 elements each); fewer would stream it through small blocks
    assert template.space.param("ROW_THREADS").values == (128, 256, 512, 1024)


def test_fused_add_writes_the_residual_once_and_reads_it_back_from_registers() -> None:
    template, _ = _sample("fused_add_rms_norm", "fused_add_rms_norm_kernel")
    branch = template.source[template.source.index("VARIANT == 1") :]
    # loop 1 loads input and residual and stores the residual; loop 2 re-reads it only in the two-pass form
    assert branch.count("cutune_rr_store(residual_row, cutune_s1") == 1
    second = branch.split("cutune_rr_allreduce")[1]
    reload = "if constexpr (!cutune_one_pass) cutune_rr_load_whole(cutune_s1_cache[cutune_one_pass ? cutune_c : 0]"
    assert f"{reload}, residual_row" in second
    assert "cutune_rr_load_whole(cutune_s2_group[cutune_c - cutune_g], weight, cutune_base" in second
    assert "cutune_rr_store(input_row, cutune_s0" in branch
    assert "const float total = sum_sq;" in branch  # the cub result's alias is the all-reduced total


def test_layer_norm_keeps_its_two_reductions_apart() -> None:
    _, body = _data("layer_norm.cu", "layer_norm_kernel")
    assert "local = cutune_rr_allreduce<ROW_THREADS>(local, cutune_rr_sum{}" in body
    assert "float s_mean = local / n;" in body  # buf[0] after the tree is the total of `local`
    assert "sq = cutune_rr_allreduce<ROW_THREADS>(sq, cutune_rr_sum{}" in body
    assert "float s_rstd = rsqrtf(sq / n + eps);" in body
    assert "buf[" not in body and "const int tid" not in body


def test_softmax_reduces_a_max_then_a_sum() -> None:
    _, body = _data("softmax.cu", "softmax_kernel")
    assert "m = cutune_rr_allreduce<ROW_THREADS>(m, cutune_rr_max{}" in body
    assert "s = cutune_rr_allreduce<ROW_THREADS>(s, cutune_rr_sum{}" in body
    assert "const float block_max = m;" in body and "float row_sum = block_sum;" in body


def test_shuffle_rms_norm_drops_its_warp_sums() -> None:
    _, body = _data("rms_norm_shfl.cu", "rms_norm_shfl_kernel")
    assert "float inv_rms = rsqrtf(sum / hidden + eps);" in body
    assert "warp_sums" not in body and "__shfl" not in body and "lane" not in body


def test_cooperative_groups_tile_shuffles_are_the_block_reduction_and_the_variance_is_finished_in_place() -> None:
    _, body = _data("tile_layer_norm.cu", "tile_layer_norm_kernel")
    assert "sum = cutune_rr_allreduce<ROW_THREADS>(sum, cutune_rr_sum{}" in body
    assert "variance = cutune_rr_allreduce<ROW_THREADS>(variance, cutune_rr_sum{}" in body
    # the in-place steps after the reduction stay, in order, before the value and the per-row store that read them
    finish = ["variance /= hidden;", "variance += eps;", "const float rstd = rsqrtf(variance);", "rstd_out[row] = rstd"]
    assert all(step in body for step in finish)
    assert [body.index(step) for step in finish] == sorted(body.index(step) for step in finish)
    assert "shfl" not in body and "partials" not in body and "g.thread_rank" not in body


def test_a_shuffle_wrapper_without_a_mask_unrolled_by_hand_is_reduced_once() -> None:
    _, body = _data("tile_layer_norm.cu", "warp_rms_norm_kernel")
    # once in each copy of the row's code (rows that fit ROW_CAP packs a thread, longer rows)
    assert body.count("cutune_rr_allreduce") == 2 and "shfl_xor_sync" not in body
    assert "sum_sq /= hidden;" in body  # an update of the total after its reduction, not a step of it


def test_a_half2_row_in_float2_registers_under_an_arch_guard_keeps_the_guard_and_its_pointers() -> None:
    _, body = _data("half2_layer_norm.cu", "half2_layer_norm_kernel")
    lines = body.strip().splitlines()
    assert lines[0] == "#if __CUDA_ARCH__ >= 530" and lines[-1] == "#endif"  # where it is compiled, as the original
    # local __half2 pointers moved to the row, one declared between the passes, each a row the loops read
    assert "in2 += cutune_row * pairs;" in body and "const __half2* gamma2 = reinterpret_cast" in body
    assert "cutune_rr_store(out2, " in body and "cutune_rr_pack<float2, ROW_VEC> cutune_s0_cache[" in body
    # each pair's parts updated in place in the registers
    assert "cutune_s0.v[cutune_v].x -= mean;" in body and "vals" not in body
    # templatized, the specialised size is declared before the directive: still the whole body under it
    ctx = open_kernel(DATA / "half2_layer_norm.cu", "half2_layer_norm_kernel")
    variant = RowReduce().apply(ctx.template_model, "half2_layer_norm_kernel", ctx.require_spec())
    assert variant.body.startswith("#if __CUDA_ARCH__ >= 530\n") and "const int pairs = PAIRS_CT" in variant.body


@pytest.mark.parametrize(
    ("kernel", "reason"),
    [
        ("strided_kernel", "the row is not contiguous in `j`"),
        ("atomic_kernel", "updates memory with atomicAdd"),
        ("early_exit_kernel", "leaves the row loop early (data-dependent control flow across elements)"),
        ("unknown_reduce_kernel", "the block-wide reduction of `sum` is not one the rewrite can identify"),
        ("paired_kernel", "accumulates into `acc.s`, a part of a compound value"),
        ("online_kernel", "`s` is carried from element to element"),
        ("counted_rows_kernel", "the loop over `iterations` rounds leaves the thread's last, partial round undone"),
        ("skipped_stage_kernel", "combines the warps' partials of `s` only `if (n > kTile)`: where that does not hold"),
        ("tile_partial_kernel", "shuffles `s` over offsets it cannot count before storing each warp's partial"),
        ("half_warp_partial_kernel", "shuffles `s` over offsets [1, 2, 4, 8] before storing each warp's partial"),
        ("down_last_lane_kernel", "stores `s`, shuffled down, from lanes other than the first"),
        ("group_rows_kernel", "walks the row from `lane` (line 156), the thread index modulo `group`: a row's threads"),
        ("pair_sums_kernel", "accumulates into `out[half]`, a part of a compound value or one fixed element"),
    ],
)
def test_refuses_with_its_reason(kernel: str, reason: str) -> None:
    path = DATA / "refused.cu"
    model = parse_source(path.read_text(), str(path))
    with pytest.raises(TransformRefused) as refused:
        RowReduce().apply(model, kernel, None)
    assert reason in refused.value.reason


def test_a_block_uniform_early_return_leaves_the_row_undone() -> None:
    # the block stays for the reductions (every thread must reach them); its row is neither read nor written
    _, body = _data("row_grid.cu", "padded_rms_norm_kernel")
    assert "return" not in body
    assert "const bool cutune_row_ok = cutune_row_in && !(row >= num_rows);" in body
    assert body.index("const int row = cutune_row;") < body.index("cutune_row_ok = cutune_row_in")


def test_a_block_uniform_guard_around_the_rest_is_the_early_return_it_stands_for() -> None:
    _, body = _data("row_grid.cu", "guarded_softmax_kernel")
    assert "const bool cutune_row_ok = cutune_row_in && !(!(row < rows));" in body
    assert "m = cutune_rr_allreduce<ROW_THREADS>(m, cutune_rr_max{}" in body
    assert "s = cutune_rr_allreduce<ROW_THREADS>(s, cutune_rr_sum{}" in body


def test_a_three_dimensional_grid_keeps_its_other_axes() -> None:
    # one row per block: blockIdx.y/z and gridDim mean what they meant in the original launch
    _, body = _data("row_grid.cu", "head_softmax_kernel")
    assert "const int rows = gridDim.x;" in body and "blockIdx.z * batch_stride + blockIdx.y * head_stride" in body
    assert "const unsigned int cutune_row = blockIdx.x;" in body and "threadIdx.y" not in body


def test_a_two_dimensional_block_numbered_in_order_becomes_one_line_of_threads() -> None:
    # dim3(32, warps): threadIdx.y picks a warp of the same row; the variant launches ROW_THREADS along x instead
    path = DATA / "row_grid.cu"
    variant = RowReduce().apply(parse_source(path.read_text(), str(path)), "warp_grid_rms_norm_kernel", None)
    code = "\n".join(line for line in variant.body.splitlines() if not line.startswith("//"))
    assert "threadIdx.y" not in code and "blockDim" not in code
    assert "ss = cutune_rr_allreduce<ROW_THREADS>(ss, cutune_rr_sum{}, cutune_red0_0);" in variant.body
    assert "const float scale = rsqrtf(ss / hidden + eps);" in variant.body
    assert variant.launch is not None and variant.launch.block == ("ROW_THREADS", "1")


def test_pointers_moved_to_the_row_before_the_loops_stay_moved() -> None:
    _, body = _data("row_grid.cu", "strided_scale_kernel")
    assert "in += blockIdx.y * channel_stride + cutune_row * row_stride;" in body
    assert body.index("out += ") < body.index("cutune_rr_load")
    assert "amax = cutune_rr_allreduce<ROW_THREADS>(amax, cutune_rr_max{}" in body


def test_pointers_moved_under_a_block_uniform_branch_stay_moved_by_the_whole_branch() -> None:
    _, body = _data("row_grid.cu", "gated_rms_norm_kernel")
    block = "if constexpr (kGated) {\n    const int gate_row = cutune_row % gate_rows;"
    assert block in body and body.index(block) < body.index("cutune_rr_load")
    assert "gate[g]" in body  # a read of the gate only under its branch stays there, one element at a time


def test_compile_time_checks_before_the_loops_stay_in_the_variant() -> None:
    path = SAMPLES / "packed_add_rms_norm.cu"
    variants, _ = propose_variants(parse_source(path.read_text(), str(path)), "packed_add_rms_norm_kernel", None)
    body = next(v.body for v in variants if v.name == "row_reduce")
    assert body.count("static_assert(") == 2 and body.index("static_assert(") < body.index("cutune_rr_load")
    # each pack named through the loop's 64-bit index locals is read as the row's element
    assert "(residual_p) + (static_cast<int64_t>(cutune_row) * packs)" in body


def test_a_pack_written_value_by_value_through_an_index_local_is_a_store_of_the_row() -> None:
    path = SAMPLES / "packed_add_rms_norm.cu"
    model = parse_source(path.read_text(), str(path))
    variants, _ = propose_variants(model, "packed_add_rms_norm_quant_kernel", None)
    body = next(v.body for v in variants if v.name == "row_reduce")
    # the second loop's stores are kept as written, each at the element the thread now plays
    assert "const int id = cutune_row * packs + idx;" in body
    assert "out[id * WIDTH + j] = quantize_int8(static_cast<float>(normed), scale_inv);" in body


def test_a_write_of_part_of_an_element_loads_the_element_and_stores_it_whole() -> None:
    _, body = _data("row_grid.cu", "centre_x_kernel")
    second = body[body.index("xy[blockIdx.x * n + j].x -= total / n") :]  # the second loop, from its comment
    assert "cutune_rr_load(cutune_s0_cache" in second and "cutune_rr_store((xy) + (cutune_row * n), cutune_s0" in second
    assert "cutune_s0.v[cutune_v].x -= total / n;" in second


def test_an_array_read_only_under_a_condition_is_read_there_element_by_element() -> None:
    _, body = _data("row_grid.cu", "optional_gate_kernel")
    # a null gate is never loaded: the original's test guards the one read of each element
    assert "gate != nullptr ? v * gate[cutune_row * n + j] : v;" in body and "cutune_rr_load(cutune_s2" not in body


@pytest.mark.parametrize(
    ("kernel", "reason"),
    [
        ("thread_gated_kernel", "derives a value the loops read from the thread index"),
        ("flagged_rebase_kernel", "does work before the first row loop that the rewrite cannot place"),
        ("optional_scale_kernel", "reads `x[blockIdx.x*n+j]` only under a condition and writes it too"),
        ("thread_exit_kernel", "leaves the kernel early on `threadIdx.x>=n`, not the same for every thread"),
        ("persistent_exit_kernel", "leaves the kernel inside the persistent row loop"),
        ("scaled_exit_kernel", "reads memory after the early return, where the rows that leave would read it"),
        ("thread_rebase_kernel", "does work before the first row loop that the rewrite cannot place"),
        # row 0's warp 0 sum read by every row: one thread's value broadcast, found before the row index from y
        ("rows_along_y_kernel", "stores `sum` to shared memory `total`, but nothing combines the threads' values"),
        ("broadcast_sum_kernel", "stores `sum` to shared memory `first`, but nothing combines the threads' values"),
    ],
)
def test_refuses_an_exit_or_a_move_it_cannot_prove_block_uniform(kernel: str, reason: str) -> None:
    path = DATA / "row_grid.cu"
    with pytest.raises(TransformRefused) as refused:
        RowReduce().apply(parse_source(path.read_text(), str(path)), kernel, None)
    assert reason in refused.value.reason


def test_an_exit_on_the_rows_element_of_a_const_array_is_block_uniform() -> None:
    path = DATA / "row_grid.cu"
    body = RowReduce().apply(parse_source(path.read_text(), str(path)), "ragged_exit_kernel", None).body
    # read only for a row in range, as the original reads it only for its own block
    assert "cutune_row_ok = cutune_row_in && !(lengths[cutune_row] == 0);" in body and "return" not in body


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (("const int* lengths", "int* lengths"), "which reads memory"),  # the kernel could write it
        (("if (lengths[blockIdx.x]", "if (lengths[threadIdx.x]"), "which reads memory"),  # a thread's own
        (("if (lengths[blockIdx.x]", "if (lengths[lengths[blockIdx.x]]"), "which reads memory"),
        (("if (lengths[blockIdx.x]", "if (out[blockIdx.x]"), "which reads memory"),  # what the kernel writes
    ],
)
def test_an_exit_on_memory_the_kernel_may_change_or_another_threads_element_is_refused(
    change: tuple[str, str], reason: str
) -> None:
    path = DATA / "row_grid.cu"
    text = path.read_text()
    start = text.index("__global__ void ragged_exit_kernel")
    edited = text[:start] + text[start:].replace(*change, 1)
    with pytest.raises(TransformRefused) as refused:
        RowReduce().apply(parse_source(edited, str(path)), "ragged_exit_kernel", None)
    assert reason in refused.value.reason


def _slice_softmax(change: tuple[str, str] = ("", "")) -> SourceModel:
    """The slice softmax sample (its early return on a slice start from ceil_div, round_up and sizeof), canonical."""
    path = SAMPLES / "slice_softmax.cu"
    model = parse_source(path.read_text().replace(*change), str(path))
    return canonicalise(model, "slice_softmax_stats_kernel").model


def test_an_exit_on_integer_helpers_over_block_uniform_values_is_block_uniform() -> None:
    body = RowReduce().apply(_slice_softmax(), "slice_softmax_stats_kernel", None).body
    assert "return" not in body and "cutune_row_ok = cutune_row_in && !(slice_start >= vocab);" in body
    assert "slice_stride = round_up(ceil_div(vocab, num_slices), pack_elems);" in body
    assert "slice_size = min(slice_stride, vocab - slice_start);" in body  # after the exit: computes, reads nothing


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (("round_up(ceil_div(", "slice_width(("), "leaves the kernel early on `slice_start`, not known"),
        (("pack_elems);", "pack_elems + threadIdx.x % 2);"), "leaves the kernel early on `slice_start`, not known"),
        (("min(slice_stride,", "min(logits[0] > 0 ? 1u : slice_stride,"), "reads memory after the early return"),
    ],
)
def test_an_exit_through_other_calls_or_the_thread_is_not_block_uniform(change: tuple[str, str], reason: str) -> None:
    with pytest.raises(TransformRefused) as refused:
        RowReduce().apply(_slice_softmax(change), "slice_softmax_stats_kernel", None)
    assert reason in refused.value.reason


def test_a_pair_accumulator_is_two_reductions_of_its_parts() -> None:
    _, body = _data("pair_layer_norm.cu", "pair_layer_norm_kernel")
    assert "float2" not in body and "warp_sum" not in body
    assert "stats_x = cutune_rr_allreduce<ROW_THREADS>(stats_x, cutune_rr_sum{}" in body
    assert "stats_y = cutune_rr_allreduce<ROW_THREADS>(stats_y, cutune_rr_sum{}" in body
    assert "const float rstd = rsqrtf(stats_y / hidden - mean * mean + eps);" in body
    path = DATA / "pair_layer_norm.cu"
    with pytest.raises(TransformRefused) as refused:
        RowReduce().apply(parse_source(path.read_text(), str(path)), "merged_layer_norm_kernel", None)
    assert "accumulates into `stats.x`, a part of a compound value" in refused.value.reason


def test_rows_on_the_blocks_y_axis_become_one_row_per_block() -> None:
    path = DATA / "rows_on_y.cu"
    model = parse_source(path.read_text(), str(path))
    spec = load_spec(DATA / "rows_on_y.tune.toml").kernel("warp_rows_rms_norm_kernel")
    variant = RowReduce().apply(model, "warp_rows_rms_norm_kernel", spec)
    assert "const int row = cutune_row;" in variant.body and "threadIdx.y" not in variant.body
    assert "const bool cutune_row_ok = cutune_row_in && !(row >= rows);" in variant.body  # the spare rows leave
    assert "x += int64_t(row) * hidden;" in variant.body  # an integer's functional cast reads no memory
    _, combined = with_variants(model, "warp_rows_rms_norm_kernel", [variant], spec)
    assert combined is not None
    names = {**limits_for("sm_90").as_names(), "rows": 9, "hidden": 1000, "VARIANT": 1, "ROW_THREADS": 128}
    # the spare rows of the original's 3 blocks of 4 leave: a block for each of the 9 rows it bounds
    assert combined.launch({**names, "ROW_VEC": 4})[:2] == ((9, 1, 1), (128, 1, 1))
    # a grid short of the rows (2 blocks of 4 for 9): the rows it bounds are not all the original's, the grid stays
    short = replace(spec, grid=("rows / 4",))
    variant = RowReduce().apply(model, "warp_rows_rms_norm_kernel", short)
    assert variant.launch is not None and variant.launch.grid[0] == "({grid.x}) * ({block.y})"
    # its y axis also picks the row's shared slot, read as the row's own; thread 0's sum is broadcast, not reduced
    with pytest.raises(TransformRefused, match=r"stores `s` to shared memory `slot`, but nothing combines"):
        RowReduce().apply(model, "slot_rows_kernel", None)


@pytest.mark.nvcc
@needs_nvrtc
def test_rows_on_y_meet_in_their_own_slice_of_shared_memory(tmp_path: Path) -> None:
    # several warps per row on y, the row's warps' sums in `row_partials[threadIdx.y][warp]`: one row per block
    template, spec = _sample("rows_per_block_rms_norm", "rows_per_block_rms_norm_kernel")
    body = template.source
    assert "sum_sq = cutune_rr_allreduce<ROW_THREADS>(sum_sq, cutune_rr_sum{}" in body
    assert "const bool cutune_row_ok = cutune_row_in && !(row >= rows);" in body  # the spare rows leave
    names = {**limits_for("sm_90").as_names(), "rows": 9, "cols": 300, "VARIANT": 1, "ROW_THREADS": 64}
    # short rows, bounded by `rows`, share blocks again: the variant's own count of rows per block
    assert spec.launch({**names, "ROW_VEC": 8, "ROWS_PER_BLOCK": 2})[:2] == ((5, 1, 1), (64, 2, 1))
    assert spec.launch({**names, "VARIANT": 0})[:2] == ((3, 1, 1), (64, 4, 1))
    configs = [
        {**template.space.default(), "VARIANT": 1, "ROW_THREADS": t, "ROW_VEC": 8, "ROWS_PER_BLOCK": r}
        for t, r in ((32, 8), (256, 1))
    ]
    expressions = name_expressions(template, spec, configs)
    nvcc_names, nvrtc_names = compile_both(template, expressions, tmp_path, SAMPLES / "rows_per_block_rms_norm.cu")
    assert set(nvrtc_names) == set(expressions) and set(nvrtc_names.values()) <= set(nvcc_names)


@pytest.mark.nvcc
@needs_nvrtc
def test_a_warp_per_row_of_a_1d_block_is_read_as_rows_on_y(tmp_path: Path) -> None:
    # warp `threadIdx.x / 32` picks the row, lane `threadIdx.x % 32` walks it by 32: a (32, 4) block's rows on y
    # (the warps per block a template parameter the launch matches: read as blockDim.x / 32 in canonical form)
    path = SAMPLES / "rows_per_block_rms_norm.cu"
    kernel = "warp_rows_add_rms_norm_kernel"
    base = templatize(parse_source(path.read_text(), str(path)), kernel)
    base_model = parse_source(base.source, str(path))
    spec = load_spec(SAMPLES / "rows_per_block_rms_norm.tune.toml").kernel(kernel)
    variant = RowReduce().apply(canonicalise(base_model, kernel).model, kernel, spec)
    template, combined = with_variants(base_model, kernel, [variant], spec, base=base)
    assert combined is not None
    spec, body = combined, template.source
    assert "sum_sq = cutune_rr_allreduce<ROW_THREADS>(sum_sq, cutune_rr_sum{}" in body
    assert "const bool cutune_row_ok = cutune_row_in && !(row >= rows);" in body  # the spare warps leave
    names = {**limits_for("sm_90").as_names(), "rows": 7, "cols": 1000, "VARIANT": 1, "ROW_THREADS": 128}
    assert spec.launch({**names, "ROW_VEC": 8, "ROWS_PER_BLOCK": 4})[:2] == ((2, 1, 1), (128, 4, 1))
    assert spec.launch({**names, "VARIANT": 0})[:2] == ((2, 1, 1), (128, 1, 1))
    configs = [
        {**template.space.default(), "VARIANT": 1, "ROW_THREADS": t, "ROW_VEC": 8, "ROWS_PER_BLOCK": r}
        for t, r in ((64, 4), (1024, 1))
    ]
    expressions = name_expressions(template, spec, configs)
    nvcc_names, nvrtc_names = compile_both(template, expressions, tmp_path, SAMPLES / "rows_per_block_rms_norm.cu")
    assert set(nvrtc_names) == set(expressions) and set(nvrtc_names.values()) <= set(nvcc_names)


@pytest.mark.parametrize(
    ("edit", "block", "reason"),
    [
        # the thread's place read otherwise than as its warp and lane: the 1-D block stays
        (("if (row >= rows) return;", "if (row >= rows || threadIdx.x >= 96) return;"), "128", "leaves the kernel"),
        (("", ""), "48", "leaves the kernel early on `row`"),  # a block of a warp and a half: not whole warps
    ],
)
def test_a_warp_per_row_stays_in_its_1d_block_where_unsure(edit: tuple[str, str], block: str, reason: str) -> None:
    path = SAMPLES / "rows_per_block_rms_norm.cu"
    kernel = "warp_rows_add_rms_norm_kernel"
    text = path.read_text().replace(*edit)
    spec = replace(load_spec(SAMPLES / "rows_per_block_rms_norm.tune.toml").kernel(kernel), block=(block,))
    with pytest.raises(TransformRefused, match=reason):
        RowReduce().apply(canonicalise(parse_source(text, str(path)), kernel).model, kernel, spec)


def test_a_shared_array_the_rows_of_a_block_share_keeps_them_in_one_block() -> None:
    # row 0's slice read by every row: the rows of a block meet through it, so none may move to a block of its own
    path = SAMPLES / "rows_per_block_rms_norm.cu"
    text = path.read_text().replace("total += row_partials[threadIdx.y][w];", "total += row_partials[0][w];")
    assert "row_partials[0][w]" in text
    with pytest.raises(TransformRefused, match=r"leaves the kernel early on `row`"):  # the row is no block's own
        RowReduce().apply(parse_source(text, str(path)), "rows_per_block_rms_norm_kernel", None)


def test_an_accumulator_set_afresh_between_the_loops_is_set_afresh_after_its_reduction() -> None:
    path = DATA / "group_rows.cu"
    model = canonicalise(parse_source(path.read_text(), str(path)), "group_norm_kernel").model  # offset loops
    body = RowReduce().apply(model, "group_norm_kernel", None).body
    mean = body.index("const float mean =")
    assert mean < body.index("\nacc = 0.f;", mean) < body.index("acc += d * d;")  # the variance sums from zero
    conditional = path.read_text().replace("  acc = 0.f;\n", "  if (threadIdx.x == 0) acc = 0.f;\n")
    model = canonicalise(parse_source(conditional, str(path)), "group_norm_kernel").model
    with pytest.raises(TransformRefused, match="sets `acc` afresh on a condition after its reduction"):
        RowReduce().apply(model, "group_norm_kernel", None)


def test_a_per_row_value_the_first_thread_stores_is_stored_by_the_rows_first_thread() -> None:
    # training LayerNorm: mean and rstd saved for the backward pass; every thread has them after the all-reduce
    _, body = _data("row_stats.cu", "train_layer_norm_kernel")
    assert "if (cutune_row_ok && threadIdx.x == 0) mean_out[row] = s_mean;" in body
    assert "if (cutune_row_ok && threadIdx.x == 0 && (save_rstd)) rstd_out[row] = s_rstd;" in body
    # each store after the value it reads, and the row's last loop after both
    assert body.index("float s_mean = total / hidden;") < body.index("mean_out[row] = s_mean;")
    assert body.index("float s_rstd = ") < body.index("rstd_out[row] = s_rstd;") < body.rindex("cutune_rr_store(")
    assert "if (tid == 0)" not in body and "partial[" not in body


def test_a_per_row_store_of_a_shared_trees_total_under_a_uniform_branch_stores_the_total() -> None:
    _, body = _data("row_stats.cu", "tree_mean_kernel")
    assert "if (cutune_row_ok && threadIdx.x == 0 && (save_mean)) mean_out[cutune_row] = local / n;" in body
    assert "buf[" not in body


def test_refuses_a_per_row_store_not_made_by_the_first_thread_alone() -> None:
    path = DATA / "row_stats.cu"
    with pytest.raises(TransformRefused) as refused:
        RowReduce().apply(parse_source(path.read_text(), str(path)), "every_thread_stores_kernel", None)
    assert "writes `mean_out[blockIdx.x]` between the row loops" in refused.value.reason


def test_refuses_an_elementwise_kernel() -> None:
    path = SAMPLES / "silu_and_mul.cu"
    with pytest.raises(TransformRefused, match=r"starts elsewhere than at threadIdx\.x"):
        RowReduce().apply(parse_source(path.read_text(), str(path)), "silu_and_mul_kernel", None)


@pytest.mark.nvcc
@needs_nvrtc
@pytest.mark.parametrize(
    ("stem", "kernel"), [("rms_norm", "rms_norm_kernel"), ("fused_add_rms_norm", "fused_add_rms_norm_kernel")]
)
def test_samples_compile_at_several_configurations(stem: str, kernel: str, tmp_path: Path) -> None:
    template, _ = _sample(stem, kernel)
    qualified = f"serving::{kernel}"
    # <scalar_t, HIDDEN_SIZE_CT, VARIANT, ROW_THREADS, ROW_VEC>: the original, one pass, two passes
    expressions = [
        f"{qualified}<__nv_bfloat16, 0, 0, 256, 8>",
        f"{qualified}<__nv_bfloat16, 4096, 1, 512, 8>",
        f"{qualified}<__nv_bfloat16, 8192, 1, 128, 8>",
        f"{qualified}<__nv_bfloat16, 8192, 1, 1024, 4>",
        f"{qualified}<__nv_bfloat16, 0, 1, 1024, 4>",
    ]
    nvcc_names, nvrtc_names = compile_both(template, expressions, tmp_path)
    assert set(nvrtc_names) == set(expressions)
    assert set(nvrtc_names.values()) <= set(nvcc_names)
    # short rows: <..., ROW_THREADS, ROWS_PER_BLOCK, ROW_VEC>, several rows per block
    short, _ = _sample(stem, kernel, ({"num_tokens": 33, "hidden_size": 256},))
    rows = [f"{qualified}<__nv_bfloat16, 256, 1, 32, 4, 8>", f"{qualified}<__nv_bfloat16, 0, 1, 64, 2, 4>"]
    nvcc_names, nvrtc_names = compile_both(short, rows, tmp_path)
    assert set(nvrtc_names) == set(rows) and set(nvrtc_names.values()) <= set(nvcc_names)


def test_an_input_gradient_in_register_arrays_reads_beta_where_asked_and_sets_its_sum_afresh() -> None:
    template, spec = _sample("register_layer_norm", "layer_norm_bwd_input_kernel")
    assert {p.name: p.values for p in template.space.params}["ROW_THREADS"] == (256, 512, 1024)  # >= the launch's
    path = SAMPLES / "register_layer_norm.cu"
    variant = RowReduce().apply(parse_source(path.read_text(), str(path)), "layer_norm_bwd_input_kernel", spec)
    assert "(saved_v - beta[r]) / g" in re.sub(r"cutune_s\d\.v\[cutune_v\]", "saved_v", variant.body)
    assert "\nsum = 0.f;\n" in variant.body and "auto sum" not in variant.body  # assigned, not declared again


def test_a_row_kept_in_register_arrays_is_never_loaded_nor_stored() -> None:
    _, spec = _sample("register_layer_norm", "layer_norm_fwd_kernel")
    path = SAMPLES / "register_layer_norm.cu"
    variant = RowReduce().apply(parse_source(path.read_text(), str(path)), "layer_norm_fwd_kernel", spec)
    # the original's 16 floats a thread, in packs of ROW_VEC, indexed by the thread's pack of the row
    assert (
        "cutune_s0_cache[cutune_one_pass ? cutune_chunks : (REGS_PER_THREAD + ROW_VEC - 1) / ROW_VEC];" in variant.body
    )
    assert "auto& cutune_s0 = cutune_s0_cache[cutune_c];" in variant.body
    assert "row_vals" not in variant.body and "cutune_rr_load(cutune_s0" not in variant.body
    assert "cutune_rr_store(row_vals" not in variant.body and "cutune_rr_store(out, cutune_s" in variant.body
    assert "if (cutune_row_ok && threadIdx.x == 0 && (training)) mean_out[row] = mean;" in variant.body


@needs_nvrtc
def test_an_aligned_row_has_all_its_loads_in_flight_before_the_first_is_used() -> None:
    # 256 threads over a row of 8192 bf16: 4 packs of 16 bytes each. Issued one after another's use, a row costs
    # 4 DRAM round trips; the PTX NVRTC makes (what the GPU backend runs) must issue all 4 in one basic block.
    template, _ = _sample("rms_norm", "rms_norm_kernel")
    expression = "serving::rms_norm_kernel<__nv_bfloat16, 8192, 1, 256, 8>"
    unit = extract_kernel(parse_source(template.source), template.kernel, instantiations=(expression,), for_nvrtc=True)
    ptx, _ = nvrtc_compiled(unit)
    blocks = re.split(r"\n\$L__BB\w+:", ptx)
    assert max(b.count("ld.global.nc.v4.u32") for b in blocks) == 4
    # and every one of them before the first sum of squares of the row
    first_use = ptx.index("fma.rn.f32")
    assert ptx[:first_use].count("ld.global.nc.v4.u32") >= 4


@pytest.mark.nvcc
@needs_nvrtc
@pytest.mark.parametrize(
    ("file", "kernel", "expressions"),
    [
        ("layer_norm.cu", "layer_norm_kernel", ["layer_norm_kernel<1, 256, 4>", "layer_norm_kernel<1, 32, 8>"]),
        ("softmax.cu", "softmax_kernel", ["softmax_kernel<256, 1, 128, 8>", "softmax_kernel<256, 1, 1024, 4>"]),
        ("rms_norm_shfl.cu", "rms_norm_shfl_kernel", ["rms_norm_shfl_kernel<float, 1, 64, 4>"]),
        ("row_grid.cu", "padded_rms_norm_kernel", ["padded_rms_norm_kernel<256, 1, 128, 4>"]),
        ("row_grid.cu", "head_softmax_kernel", ["head_softmax_kernel<1, 256, 4>"]),
        ("row_grid.cu", "strided_scale_kernel", ["strided_scale_kernel<1, 128, 8>"]),
        ("row_grid.cu", "warp_grid_rms_norm_kernel", ["warp_grid_rms_norm_kernel<__half, 1, 256, 8>"]),
        ("row_grid.cu", "guarded_softmax_kernel", ["guarded_softmax_kernel<1, 128, 4>"]),
        ("row_grid.cu", "gated_rms_norm_kernel", ["gated_rms_norm_kernel<true, 1, 128, 4>"]),
        ("row_grid.cu", "ragged_exit_kernel", ["ragged_exit_kernel<1, 128, 4>"]),
        ("pair_layer_norm.cu", "pair_layer_norm_kernel", ["pair_layer_norm_kernel<256, 1, 128, 4>"]),
        ("rows_on_y.cu", "warp_rows_rms_norm_kernel", ["warp_rows_rms_norm_kernel<1, 128, 4>"]),
        ("group_rows.cu", "group_norm_kernel", ["group_norm_kernel<256, 1, 128, 4>"]),
        ("row_stats.cu", "train_layer_norm_kernel", ["train_layer_norm_kernel<1, 256, 4>"]),
        ("row_stats.cu", "tree_mean_kernel", ["tree_mean_kernel<1, 128, 4>"]),
        ("half2_layer_norm.cu", "half2_layer_norm_kernel", ["half2_layer_norm_kernel<1, 256, 2>"]),
    ],
)
def test_row_kernels_compile(file: str, kernel: str, expressions: list[str], tmp_path: Path) -> None:
    template, _ = _data(file, kernel)
    nvcc_names, nvrtc_names = compile_both(template, expressions, tmp_path)
    assert len(nvrtc_names) == len(expressions) and set(nvrtc_names.values()) <= set(nvcc_names)


@pytest.mark.nvcc
@needs_nvrtc
@pytest.mark.parametrize(
    ("stem", "kernel", "block"),
    [
        ("warp_pack_rms_norm", "warp_pack_rms_norm_kernel", "32"),
        ("warp_pack_rms_norm", "warp_pack_add_rms_norm_kernel", "32"),
        ("head_rms_norm", "head_rms_norm_kernel", "32"),
        ("rounds_softmax", "rounds_softmax_kernel", "min("),
        ("warp_softmax", "warp_softmax_kernel", "32"),
    ],
)
def test_counted_rounds_over_packs_compile(stem: str, kernel: str, block: str, tmp_path: Path) -> None:
    path = SAMPLES / f"{stem}.cu"
    base = templatize(parse_source(path.read_text(), str(path)), kernel)
    base_model = parse_source(base.source, str(path))
    spec = load_spec(SAMPLES / f"{stem}.tune.toml").kernel(kernel)
    variant = RowReduce().apply(canonicalise(base_model, kernel).model, kernel, spec)
    template, combined = with_variants(base_model, kernel, [variant], spec, base=base)
    assert combined is not None and combined.block[0].startswith(f"(ROW_THREADS) if VARIANT == 1 else ({block}")
    default = template.space.default()
    pairs = ((32, False), (1024, True))
    configs = [{**default, "VARIANT": 1, "ROW_THREADS": t, "SPECIALIZE_COLS": c} for t, c in pairs]
    expressions = name_expressions(template, combined, configs)
    nvcc_names, nvrtc_names = compile_both(template, expressions, tmp_path, path)
    assert set(nvrtc_names) == set(expressions) and set(nvrtc_names.values()) <= set(nvcc_names)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("stem", "kernel"),
    [
        ("rms_norm", "rms_norm_kernel"),
        ("fused_add_rms_norm", "fused_add_rms_norm_kernel"),
        ("register_layer_norm", "layer_norm_fwd_kernel"),
        ("register_layer_norm", "layer_norm_bwd_input_kernel"),
    ],
)
def test_the_variant_equals_the_original_on_the_gpu(stem: str, kernel: str, tmp_path: Path) -> None:
    ctx = open_kernel(SAMPLES / f"{stem}.cu", kernel)
    job = variant_alone(ctx, kernel, RowReduce().apply(ctx.template_model, kernel, ctx.require_spec()))
    options = replace(tune_options(ctx, trials=8, seconds=60), workspace=tmp_path, sanitize=False)
    result = tune(job, create_backend("cupy"), options)
    assert result.original == job.template.space.default()  # measured first, as the reference
    # variant configurations measured, each equal to the original (proposals outside the space are turned away)
    # registers are known after the compile: a configuration the GPU cannot launch is skipped, as in a search
    assert result.trials >= 3 and set(result.failures) <= {"infeasible", "resources"}


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("file", "kernel"),
    [
        ("pair_layer_norm.cu", "pair_layer_norm_kernel"),
        ("rows_on_y.cu", "warp_rows_rms_norm_kernel"),
        ("group_rows.cu", "group_norm_kernel"),
        ("row_stats.cu", "train_layer_norm_kernel"),
        ("tile_layer_norm.cu", "tile_layer_norm_kernel"),
        ("tile_layer_norm.cu", "warp_rms_norm_kernel"),
        ("half2_layer_norm.cu", "half2_layer_norm_kernel"),
        ("unrolled_rms_norm.cu", "unrolled_rms_norm_kernel"),  # a block reduction with its shuffles unrolled
        ("arm_rms_norm.cu", "arm_rms_norm_kernel"),  # the arm of a template flag that stages the row
    ],
)
def test_the_data_kernels_variant_equals_the_original_on_the_gpu(file: str, kernel: str, tmp_path: Path) -> None:
    _equal_read_canonically(DATA / file, kernel, tmp_path)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("stem", "kernel"),
    [
        ("warp_pack_rms_norm", "warp_pack_rms_norm_kernel"),
        ("warp_pack_rms_norm", "warp_pack_add_rms_norm_kernel"),
        ("head_rms_norm", "head_rms_norm_kernel"),  # a warp per head, the warps of a persistent grid in turn
        ("rounds_softmax", "rounds_softmax_kernel"),
        ("warp_softmax", "warp_softmax_kernel"),  # register arrays over a fixed count of checked rounds
        ("offset_rms_norm", "offset_rms_norm_kernel"),  # packs from a thread offset, helper sums, PDL runtime calls
        ("offset_rms_norm", "offset_add_rms_norm_kernel"),  # the row staged in dynamic shared memory through a cast
        ("rows_per_block_rms_norm", "rows_per_block_rms_norm_kernel"),  # rows on y meeting in their shared slices
        ("rows_per_block_rms_norm", "warp_rows_add_rms_norm_kernel"),  # a warp per row of a 1-D block
    ],
)
def test_counted_rounds_over_packs_equal_the_original_on_the_gpu(stem: str, kernel: str, tmp_path: Path) -> None:
    # at sizes of one round, a round left partly idle (257 packs on 288 threads) and several rounds the last partial
    _equal_read_canonically(SAMPLES / f"{stem}.cu", kernel, tmp_path)


def test_a_block_reduction_helper_with_unrolled_shuffles_is_read_through() -> None:
    # no loop in the helpers: their barrier is what has them written out, so row_reduce sees the reduction
    ctx = open_kernel(DATA / "unrolled_rms_norm.cu", "unrolled_rms_norm_kernel")
    canonical = canonicalise(ctx.template_model, "unrolled_rms_norm_kernel")
    assert "inline_helpers" in canonical.applied and "unrolled_block_sum(" not in kernel_body(
        canonical.model, "unrolled_rms_norm_kernel"
    )
    variant = RowReduce().apply(canonical.model, "unrolled_rms_norm_kernel", ctx.require_spec())
    assert "ss = cutune_rr_allreduce<ROW_THREADS>(ss, cutune_rr_sum{}, cutune_red0_0);" in variant.body


@pytest.mark.nvcc
@needs_nvrtc
def test_the_unrolled_reductions_variant_compiles_with_nvcc_and_nvrtc(tmp_path: Path) -> None:
    path = DATA / "unrolled_rms_norm.cu"
    ctx = open_kernel(path, "unrolled_rms_norm_kernel")
    spec = ctx.require_spec()
    name = "unrolled_rms_norm_kernel"
    variant = RowReduce().apply(canonicalise(ctx.template_model, name).model, name, spec)
    template, combined = with_variants(ctx.template_model, name, [variant], spec, base=ctx.template)
    assert combined is not None
    configs = [{**template.space.default(), "VARIANT": 1, "ROW_THREADS": t} for t in (128, 512)]
    expressions = name_expressions(template, combined, configs)
    nvcc_names, nvrtc_names = compile_both(template, expressions, tmp_path, path)
    assert set(nvrtc_names) == set(expressions) and set(nvrtc_names.values()) <= set(nvcc_names)


ARM = "arm_rms_norm_kernel"


def _arm_variant(staged: str | None) -> Variant:
    ctx = open_kernel(DATA / "arm_rms_norm.cu", ARM)
    spec = None if staged is None else replace(ctx.require_spec(), template_args={"T": "float", "kStaged": staged})
    return RowReduce().apply(canonicalise(ctx.template_model, ARM).model, ARM, spec)


def test_a_template_flags_branch_is_rewritten_at_the_arm_that_can_be() -> None:
    variant = _arm_variant(None)
    # the staged arm reads its row back; the other carries a thread's last element (right at one a thread only)
    assert variant.instantiation == (("kStaged", "true"),)
    assert variant.body.startswith("if constexpr (kStaged) {") and "cutune_rr_allreduce<ROW_THREADS>" in variant.body
    other = variant.body[variant.body.index("\n} else {") :]
    assert "held = v;" in other and "cutune_rr_allreduce" not in other  # the original body for the others
    assert variant.provenance.note.startswith("where kStaged is true: ")
    assert _arm_variant("true").instantiation == (("kStaged", "true"),)
    # a spec instantiating the other arm: the reason that arm cannot be rewritten
    with pytest.raises(TransformRefused, match="`held` is set afresh in each iteration"):
        _arm_variant("false")


@pytest.mark.nvcc
@needs_nvrtc
def test_the_arms_variant_compiles_at_both_instantiations_with_nvcc_and_nvrtc(tmp_path: Path) -> None:
    path = DATA / "arm_rms_norm.cu"
    ctx = open_kernel(path, ARM)
    spec = ctx.require_spec()
    template, combined = with_variants(ctx.template_model, ARM, [_arm_variant(None)], spec, base=ctx.template)
    assert combined is not None
    config = {**template.space.default(), "VARIANT": 1, "ROW_THREADS": 256}
    # the other instantiation compiles the original body under the variant's branch
    expressions = [
        *name_expressions(template, combined, [config]),
        *name_expressions(template, replace(combined, template_args={"T": "float", "kStaged": "false"}), [config]),
    ]
    assert any("true" in e for e in expressions) and any("false" in e for e in expressions)
    nvcc_names, nvrtc_names = compile_both(template, expressions, tmp_path, path)
    assert set(nvrtc_names) == set(expressions) and set(nvrtc_names.values()) <= set(nvcc_names)


def _equal_read_canonically(path: Path, kernel: str, tmp_path: Path) -> None:
    """The kernel's row_reduce variant, read as templatize reads it, tuned against the original: equal at every
    configuration measured."""
    ctx = open_kernel(path, kernel)
    # read in canonical form (group_rows' loops run over offset ranges), as templatize reads it
    variant = RowReduce().apply(canonicalise(ctx.template_model, kernel).model, kernel, ctx.require_spec())
    job = variant_alone(ctx, kernel, variant)
    options = replace(tune_options(ctx, trials=8, seconds=60), workspace=tmp_path, sanitize=False)
    result = tune(job, create_backend("cupy"), options)
    # registers are known after the compile: a configuration the GPU cannot launch is skipped, as in a search
    assert result.trials >= 3 and set(result.failures) <= {"infeasible", "resources"}


@pytest.mark.parametrize(
    ("stem", "kernel"),
    [
        ("rounds_softmax", "rounds_softmax_kernel"),
        ("warp_pack_rms_norm", "warp_pack_rms_norm_kernel"),
        ("offset_rms_norm", "offset_rms_norm_kernel"),
        ("offset_rms_norm", "offset_add_rms_norm_kernel"),
    ],
)
def test_every_variant_parameter_defaults_to_one_of_its_values(stem: str, kernel: str) -> None:
    # rows of 128,256 logits keep only 512 and 1024 threads: the default must be one of them, or the original
    # (every parameter at its default) is no point of the space and the search cannot start from it
    ctx = open_kernel(SAMPLES / f"{stem}.cu", kernel)
    spec = ctx.require_spec()
    variant = RowReduce().apply(canonicalise(ctx.template_model, kernel).model, kernel, spec)
    assert all(p.default in p.values for p in variant.params)
    template, combined = with_variants(ctx.template_model, kernel, [variant], spec, base=ctx.template)
    assert combined is not None
    assert Feasibility(template.space, combined, limits_for("sm_90")).violation(template.space.default()) is None


def test_only_the_variant_keeps_the_original_as_reference() -> None:
    template, spec = _sample("rms_norm", "rms_norm_kernel")
    space = only_the_variant(template.space)
    check = Feasibility(space, spec, limits_for("sm_90"))
    assert check.violation(space.default()) is None  # tune measures it first
    configs = feasible_configs(space, spec, limits_for("sm_90")) or ()
    assert {c["VARIANT"] for c in configs if c != space.default()} == {1}
    assert len(configs) == 1 + 2 * 2 * 4 * 2  # specialise × fast math × threads × vector width, + the original


WARP_ONLY = """
__global__ void k(float* out, const float* x, int n) {
  x += blockIdx.x * n;
  out += blockIdx.x * n;
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = x[i] / s;
}
void launch(float* out, const float* x, int rows, int n) { k<<<rows, THREADS>>>(out, x, n); }
"""


@pytest.mark.parametrize(("threads", "applies"), [("256", False), ("32", True), ("WARP_SIZE", True)])
def test_a_reduction_within_a_warp_only_needs_rows_of_one_warp(threads: str, applies: bool) -> None:
    # with 256 threads each warp would divide by its own partial sum: the row's total would change the result
    model = parse_source(WARP_ONLY.replace("THREADS", threads))
    if applies:
        assert RowReduce().apply(model, "k", None).provenance.note.startswith("2 row loop(s), 1 reduction(s)")
    else:
        with pytest.raises(TransformRefused, match="reduces `s` within a warp only"):
            RowReduce().apply(model, "k", None)


@pytest.mark.parametrize(
    ("loop", "reason"),
    [
        ("for (int o = 16; o > 0; o >>= 1)", ""),
        ("for (unsigned int o = 1; o < WARP_SIZE; o *= 2)", ""),
        ("for (int o = 16; o > 1; o >>= 1)", "by xor shuffles over offsets [2, 4, 8, 16], not the whole warp"),
        ("for (int o = 16; o > 0; o -= 4)", "by xor shuffles over offsets it cannot count"),
    ],
)
def test_a_warp_reduction_shuffles_over_the_whole_warp(loop: str, reason: str) -> None:
    source = WARP_ONLY.replace("THREADS", "32").replace("for (int o = 16; o > 0; o >>= 1)", loop)
    if not reason:
        assert RowReduce().apply(parse_source(source), "k", None).body
    else:
        with pytest.raises(TransformRefused, match=re.escape(reason)):
            RowReduce().apply(parse_source(source), "k", None)


def test_a_helper_block_sum_over_packs_from_a_thread_offset_is_the_rows_reduction() -> None:
    path = SAMPLES / "offset_rms_norm.cu"
    # the runtime's spelling of the launch-dependency controls, kept around the new body as the asm is
    source = (
        path.read_text()
        .replace('asm volatile("griddepcontrol.wait;" ::: "memory");', "cudaGridDependencySynchronize();")
        .replace('asm volatile("griddepcontrol.launch_dependents;");', "cudaTriggerProgrammaticLaunchCompletion();")
    )
    canonical = canonicalise(parse_source(source, str(path)), "offset_rms_norm_kernel")
    assert canonical.applied == ("inline_helpers", "scaled_loops")
    body = RowReduce().apply(canonical.model, "offset_rms_norm_kernel", None).body
    assert "block_sum" not in body and "cutune_shared_block_sum_partial" not in body  # the rewrite's own reduction
    assert re.search(r"acc = cutune_rr_allreduce<ROW_THREADS>\(acc, cutune_rr_sum\{\}, cutune_red\d+_0\);", body)
    assert body.index("cudaGridDependencySynchronize();") < body.index("cutune_row")
    assert body.rstrip().endswith("cudaTriggerProgrammaticLaunchCompletion();\n#endif")


def test_a_row_staged_through_a_cast_of_the_dynamic_array_is_kept_where_it_was() -> None:
    path = SAMPLES / "offset_rms_norm.cu"
    canonical = canonicalise(parse_source(path.read_text(), str(path)), "offset_add_rms_norm_kernel")
    variant = RowReduce().apply(canonical.model, "offset_add_rms_norm_kernel", None)
    # the stage pointer starts at the array's start already: kept as written, each thread's packs at the element
    assert "T* staged = reinterpret_cast<T*>(smem_bytes);" in variant.body
    assert "a.store(&staged[offset]);" in variant.body and "a.load(&staged[offset]);" in variant.body
    assert variant.launch.shared_mem == "{shared_mem}"  # launched with the original's allocation
    moved = path.read_text().replace("a.store(&staged[offset]);", "a.store(&staged[thread_offset]);")
    with pytest.raises(TransformRefused) as refused:  # a slot chosen by the thread, not by the element
        RowReduce().apply(
            canonicalise(parse_source(moved), "offset_add_rms_norm_kernel").model, "offset_add_rms_norm_kernel", None
        )
    assert (
        "reads the row it stages in shared memory (staged) otherwise than after storing it all" in refused.value.reason
    )


@pytest.mark.parametrize(
    ("update", "applies"),
    [
        ("s = fmaf(x[i], x[i], s);", True),  # a product added to the total, rounded once
        ("s = __fmaf_rn(x[i], 2.f, s);", True),
        ("s = fmaf(s, x[i], 1.f);", False),  # the total scaled: no sum
        ("s = fmaf(x[i], s, s);", False),
    ],
)
def test_an_fma_onto_the_total_is_a_sum(update: str, applies: bool) -> None:
    model = parse_source(WARP_ONLY.replace("THREADS", "32").replace("s += x[i];", update))
    if applies:
        assert update in RowReduce().apply(model, "k", None).body
    else:
        with pytest.raises(TransformRefused, match="`s` is carried from element to element"):
            RowReduce().apply(model, "k", None)


@pytest.mark.parametrize(
    ("host", "applies"),
    [
        ("dim3 grid, block; grid.x = rows; block.x = 32; k<<<grid, block>>>(out, x, n);", True),
        ("dim3 block; block.x = 32; block.y = 1; k<<<rows, block>>>(out, x, n);", True),
        ("dim3 block; block.x = 32; block.x = 256; k<<<rows, block>>>(out, x, n);", False),  # set twice
        ("dim3 block; if (n > 4) block.x = 32; k<<<rows, block>>>(out, x, n);", False),  # maybe not set
        ("dim3 block; block.x = 32; block = dim3(256); k<<<rows, block>>>(out, x, n);", False),
    ],
)
def test_a_block_set_member_by_member_is_read_at_the_launch(host: str, applies: bool) -> None:
    launch = "k<<<rows, THREADS>>>(out, x, n);"
    model = parse_source(WARP_ONLY.replace(launch, host))
    assert launch not in model.text
    if applies:
        assert RowReduce().apply(model, "k", None).body
    else:
        with pytest.raises(TransformRefused, match="reduces `s` within a warp only"):
            RowReduce().apply(model, "k", None)


HELPER_WARP = """
template <int width = 32>
static __device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = width / 2; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffff, x, offset, width);
  return x;
}
__global__ void k(float* out, const float* x, int n) {
  x += blockIdx.x * n;
  out += blockIdx.x * n;
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  s = warp_sum(s);
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = x[i] / s;
}
void launch(float* out, const float* x, int rows, int n) { k<<<rows, 32>>>(out, x, n); }
"""


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (("", ""), ""),  # llama.cpp's `warp_reduce_sum` shape: the helper's butterfly is the row's reduction
        (("s = warp_sum(s);", "s = warp_sum<16>(s);"), "the block-wide reduction of `s` is not one"),  # half a warp
        (("k<<<rows, 32>>>", "k<<<rows, 256>>>"), "reduces `s` within a warp only"),  # each warp its own total
        (("x += __shfl_xor_sync", "x = x * __shfl_xor_sync"), "the block-wide reduction of `s` is not one"),
    ],
)
def test_a_helper_whose_body_is_a_whole_warp_butterfly_is_the_rows_reduction(
    edit: tuple[str, str], reason: str
) -> None:
    model = parse_source(HELPER_WARP.replace(*edit) if edit[0] else HELPER_WARP)
    if not reason:
        body = RowReduce().apply(model, "k", None).body
        assert "warp_sum(" not in body and "s = cutune_rr_allreduce<ROW_THREADS>(s, cutune_rr_sum{}" in body
    else:
        with pytest.raises(TransformRefused, match=re.escape(reason)):
            RowReduce().apply(model, "k", None)


# the residual sample with its packs declared once before the loops, as production code reuses a `vec_t` it loads
# afresh in each iteration
HOISTED = (
    "  float acc = 0.f;\n  for (int offset = thread_offset; offset < hidden; offset += blockDim.x * kPack) {\n"
    "    Pack<T, kPack> a, b;\n",
    "  Pack<T, kPack> a, b;\n  float acc = 0.f;\n"
    "  for (int offset = thread_offset; offset < hidden; offset += blockDim.x * kPack) {\n",
)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (("    Pack<T, kPack> a, w, y;\n", "    Pack<T, kPack> w, y;\n"), ""),  # loaded afresh in the second loop too
        # the second loop reads what the first left in it: the element a thread saw last
        (
            ("    Pack<T, kPack> a, w, y;\n    a.load(&staged[offset]);\n", "    Pack<T, kPack> w, y;\n"),
            r"`a` is set afresh in each iteration of the row loop at line \d+, but the row loop at line \d+ reads it "
            "before setting it",
        ),
        # read after the loops: the last element's pack, which another split of the row changes
        (
            ("  acc = block_sum(acc);\n  const float inv", "  acc = block_sum(acc) + a.v[0];\n  const float inv"),
            r"`a` is set afresh in each iteration of the row loop at line \d+, but it is used outside the row loops",
        ),
    ],
)
def test_a_pack_declared_before_the_loops_and_loaded_afresh_in_each_iteration_is_the_iterations_own(
    edit: tuple[str, str], reason: str
) -> None:
    path = SAMPLES / "offset_rms_norm.cu"
    source = path.read_text().replace(*HOISTED)
    assert edit[0] in source
    kernel = "offset_add_rms_norm_kernel"
    model = canonicalise(parse_source(source.replace(*edit), str(path)), kernel).model
    if reason:
        with pytest.raises(TransformRefused, match=reason):
            RowReduce().apply(model, kernel, None)
        return
    body = RowReduce().apply(model, kernel, None).body
    assert body.index("Pack<T, kPack> a, b;") < body.index("for (int cutune_g")  # declared once, before the loops
    # once in each copy of the row's code (rows that fit ROW_CAP packs a thread, longer rows)
    assert body.count("a.load(x + offset);") == 2 and body.count("a.load(&staged[offset]);") == 2


def test_a_row_staged_by_subscript_in_dynamic_shared_memory_stays_there_one_row_a_block() -> None:
    path = SAMPLES / "staged_softmax.cu"
    variant = RowReduce().apply(parse_source(path.read_text(), str(path)), "staged_softmax_kernel", None)
    # each thread stores its packs of the row at the element and reads back only those: the original's allocation
    assert "extern __shared__ float row_buf[];" in variant.body
    assert "cutune_rr_store(row_buf, " in variant.body and "cutune_rr_load(cutune_s1_cache" in variant.body
    assert variant.launch is not None and variant.launch.shared_mem == "{shared_mem}"
    assert variant.launch.block == ("ROW_THREADS", "1")  # rows sharing a block would share the staging
    # `s = 0.f; for (w ...) s += partial[w];` combines the warps' partials: the all-reduce's total is kept, not reset
    assert re.search(
        r"s = cutune_rr_allreduce<ROW_THREADS>\(s, cutune_rr_sum\{\}, cutune_red\d+_0\);\n"
        r"const float inv = 1.f / s;",
        variant.body,
    )


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        (
            "const float e = __expf(row_buf[c] - m);",
            "const float e = __expf(row_buf[c + 1] - m);",
            "reads the row it stages in shared memory (row_buf) at other elements than it stores",
        ),
        ("const float inv = 1.f / s;", "const float inv = 1.f / (s + row_buf[0]);", "row_buf"),
    ],
)
def test_a_staged_row_read_by_another_thread_is_refused(old: str, new: str, reason: str) -> None:
    source = (SAMPLES / "staged_softmax.cu").read_text().replace(old, new)
    with pytest.raises(TransformRefused, match=re.escape(reason)):
        RowReduce().apply(parse_source(source), "staged_softmax_kernel", None)


def test_a_declaration_between_the_loops_that_a_later_loop_sets_is_kept() -> None:
    # set under a condition, so no canonical step moves it into the loop: the rewrite must still declare it
    source = (
        (SAMPLES / "staged_softmax.cu")
        .read_text()
        .replace("const float inv = 1.f / s;", "const float inv = 1.f / s;\n  float p;")
        .replace(
            "out[c] = row_buf[c] * inv;",
            "{\n    if (inv > 0.f) p = row_buf[c] * inv; else p = 0.f;\n    out[c] = p;\n  }",
        )
    )
    body = RowReduce().apply(parse_source(source), "staged_softmax_kernel", None).body
    assert body.index("float p;") < body.index("if (inv > 0.f) p = ")


@pytest.mark.parametrize(("other", "applies"), [("at = cols - 1 - c;", True), ("at = 0;", False)])
def test_a_store_at_an_index_the_body_sets_from_the_element_on_every_branch_is_the_elements(
    other: str, applies: bool
) -> None:
    # FasterTransformer's int8 LayerNorm: `int output_index; if (out_col32) output_index = f(i); else ... = i;`
    store = "probs[blockIdx.x * cols + at] = row_buf[c] * inv;"  # an output the kernel only stores to
    source = (
        (SAMPLES / "staged_softmax.cu")
        .read_text()
        .replace("  float* out = probs + static_cast<int64_t>(blockIdx.x) * cols;\n", "")
        .replace(
            "out[c] = row_buf[c] * inv;",
            f"{{\n    int at;\n    if (scale > 1.f) at = c; else {other}\n    {store}\n  }}",
        )
    )
    if applies:
        assert (
            store.split(" =")[0].replace("blockIdx.x", "cutune_row")
            in RowReduce().apply(parse_source(source), "staged_softmax_kernel", None).body
        )
    else:
        with pytest.raises(TransformRefused, match=re.escape("accumulates into `probs[blockIdx.x*cols+at]`")):
            RowReduce().apply(parse_source(source), "staged_softmax_kernel", None)


def _template_softmax(old: str = "", new: str = "") -> tuple[list[Variant], list[str]]:
    path = SAMPLES / "template_softmax.cu"
    spec = open_kernel(path, "template_softmax_kernel").require_spec()
    variants, refusals = propose_variants(
        parse_source(path.read_text().replace(old, new), str(path)), "template_softmax_kernel", spec
    )
    return variants, [r.reason for r in refusals if r.recipe == "row_reduce"]


def test_partials_through_a_pointer_into_dynamic_shared_memory_and_a_sink_added_to_the_sum() -> None:
    variants, refused = _template_softmax()
    assert not refused
    body = next(v for v in variants if v.name == "row_reduce").body
    # the warps' slots (`partial`, a pointer to the array's start) go with the reduction the all-reduce replaces
    assert "partial[lane]" not in body.split("} else {")[0]
    # the sink, added to the total by every thread alike, is kept whole after the all-reduce
    assert re.search(
        r"s = cutune_rr_allreduce<ROW_THREADS>\(s, cutune_rr_sum\{\}, cutune_red\d+_0\);\n"
        r"if \(sinks\) \{\n\s*s \+= __expf\(sinks\[head\] - m\);\n\s*\}\nconst float inv = 1.0f / s;",
        body,
    )


def test_a_total_updated_where_the_rewrite_cannot_place_it_is_refused() -> None:
    # on a condition that differs between threads: dropping it, or running it everywhere, changes the total
    _, refused = _template_softmax("if (sinks) {\n    s +=", "if (threadIdx.x == 0) {\n    s +=")
    assert any("updates `s` after its reduction inside a statement it cannot place" in r for r in refused), refused


def test_a_row_of_unknown_length_is_first_tried_at_as_many_threads_as_cover_the_hosts_smallest_block() -> None:
    # the staged sample's spec gives `cols` as the row's length: the variant knows its rows, and starts at 256
    path = SAMPLES / "staged_softmax.cu"
    spec = load_spec(path.with_name("staged_softmax.tune.toml")).kernels["staged_softmax_kernel"]
    model = parse_source(path.read_text(), str(path))
    known = RowReduce().apply(model, "staged_softmax_kernel", spec).params[0]
    assert (known.name, known.default, known.try_first) == ("ROW_THREADS", 256, None)
    # a length the spec cannot tell (read from memory): the host's 64-thread block says the rows are short
    hidden = (
        re.sub(r"\bcols\b", "n", model.text)
        .replace("const int n,", "const int* n_at,")
        .replace("const int tid = threadIdx.x;", "const int n = n_at[0];\n  const int tid = threadIdx.x;")
    )
    unknown = replace(
        spec,
        block=("64",),
        args=tuple(
            replace(a, name="n_at", dtype="int32", value=None, shape=("1",)) if a.name == "cols" else a
            for a in spec.args
        ),
    )
    first = RowReduce().apply(parse_source(hidden), "staged_softmax_kernel", unknown).params[0]
    # its 64 elements at 4 floats a thread: 16 threads, but a row alone in its block keeps a warp
    assert (first.default, first.try_first) == (256, 32)
    wider = RowReduce().apply(parse_source(hidden), "staged_softmax_kernel", replace(unknown, block=("512",)))
    assert wider.params[0].try_first == 128


def _short_rows(sizes: tuple[dict[str, int], ...], block: str | None = None) -> dict[str, Variant]:
    """The variants of the LayerNorm sample (float, one pass) at `sizes` (and the host's `block`), by name."""
    ctx = open_kernel(SAMPLES / "constexpr_layer_norm.cu", "layer_norm_kernel")
    spec = replace(ctx.require_spec(), template_args={"T": "float", "kOnePassVariance": "true"}, sizes=sizes)
    spec = replace(spec, block=(block,)) if block else spec
    variants, _ = propose_variants(ctx.template_model, "layer_norm_kernel", spec)
    return {v.name: v for v in variants}


def test_short_rows_may_have_fewer_threads_than_a_warp_where_rows_share_a_block() -> None:
    variants = _short_rows(({"tokens": 8, "hidden": 100},))
    plain, chained = variants["row_reduce"], variants["row_reduce_block_items"]
    assert plain.params[0].name == "ROW_THREADS" and plain.params[0].values == (8, 16, 32)
    # one row a block: a block of fewer threads than a warp would idle the rest of it
    assert "ROW_THREADS >= warp_size" in plain.constraints
    # items of a block fill the warp together: the parent's bound gives way to theirs
    assert "ROW_THREADS >= warp_size" not in chained.constraints
    assert "ROW_THREADS * ITEMS_Y >= warp_size" in chained.constraints
    assert chained.launch is not None and "warp_size" not in "".join(chained.launch.block)
    # a row's shuffles name only its own lanes
    assert "cutune_mask = ((1u << CutuneW) - 1) << (cutune_lane / CutuneW * CutuneW);" in chained.helpers
    # long rows keep whole warps: 16 threads could not hold 2,000 elements in registers; nothing to bound then
    long_rows = _short_rows(({"tokens": 8, "hidden": 2000},))
    assert min(long_rows["row_reduce"].params[0].values) == 32
    assert not any("warp_size" in c for v in long_rows.values() for c in v.constraints)


@pytest.mark.parametrize(("block", "sub_warp"), [("64", True), ("1024", False)])
def test_rows_of_unknown_length_share_a_warp_only_where_the_host_launches_small_blocks(
    block: str, sub_warp: bool
) -> None:
    # rows bounded through a helper the spec cannot evaluate: their length is unknown, the host's block tells
    path = SAMPLES / "constexpr_layer_norm.cu"
    text = path.read_text().replace("i < hidden;", "i < row_cols(hidden);")
    model = canonicalise(parse_source(text, str(path)), "layer_norm_kernel").model
    spec = open_kernel(path, "layer_norm_kernel").require_spec()
    spec = replace(spec, template_args={"T": "float", "kOnePassVariance": "true"}, block=(block,))
    variant = RowReduce().apply(model, "layer_norm_kernel", spec)
    assert (min(variant.params[0].values) < 32) is sub_warp


# the LayerNorm sample at float, one pass, on the host (warp_emulator.h): rows of 100 on the original's 1,024 threads,
# then the variants at fewer threads a row than a warp, several rows a warp (block_items) or one row a partial warp
SHORT_HARNESS = (
    """
#include <random>
int main() {{
  const int tokens = 8, hidden = 100;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> in(tokens * hidden), gamma(hidden), beta(hidden);
  for (auto& v : in) v = 2.f + normal(rng);
  for (auto& v : gamma) v = normal(rng);
  for (auto& v : beta) v = normal(rng);
  auto run = [&](auto kernel, unsigned threads, unsigned rows = 1) {{
    std::vector<float> out(tokens * hidden, -1e30f);
    launch(tokens / rows, 1, threads, rows, [&] {{
      kernel(out.data(), in.data(), gamma.data(), beta.data(), 1e-5f, hidden);
    }});
    return out;
  }};
"""
    + COMPARED
)
# (variant, threads a row, rows a block, elements an access)
SHORT_POINTS = [
    ("row_reduce_block_items", 8, 4, 4),
    ("row_reduce_block_items", 8, 8, 2),
    ("row_reduce_block_items", 16, 2, 4),
    ("row_reduce_block_items", 16, 8, 4),
    ("row_reduce_block_items", 32, 1, 4),
    ("row_reduce", 16, 1, 4),  # half a warp: the launch's fallback where the items do not divide
    ("row_reduce", 8, 1, 2),
]


def _combined(path: Path, kernel: str, template_args: dict[str, str], size: dict[str, int]) -> Combined:
    """The sample's kernel with its variants, at `template_args` and one size of its spec's arguments."""
    ctx = open_kernel(path, kernel)
    spec = replace(ctx.require_spec(), template_args=template_args, sizes=(size,))
    return combine_all(ctx.template_model, kernel, ctx.template, spec)


@pytest.mark.parametrize(("head_dim", "threads", "workers"), [(128, 16, 2), (64, 8, 4), (576, None, None)])
def test_the_search_first_tries_threads_that_cover_a_known_row_and_the_hosts_threads_in_flight(
    head_dim: int, threads: int | None, workers: int | None
) -> None:
    # heads of head_dim / kPack packs on the host's warps (32 threads a head): the first count covers the packs, and
    # as many more workers as keep the host's threads in flight; rows longer than the default count keep it
    path = SAMPLES / "head_rms_norm.cu"
    combined = _combined(
        path,
        "head_rms_norm_kernel",
        {"kPack": "8", "T": "__nv_bfloat16"},
        {"tokens": 8, "heads": 4, "head_dim": head_dim},
    )
    variant = next(v for v in combined.variants if v.name == "row_reduce")
    firsts = {p.name: p.try_first for p in variant.params}
    assert (firsts["ROW_THREADS"], firsts["ROW_WORKERS"]) == (threads, workers)


def test_without_a_spec_the_workers_have_no_first_try() -> None:
    # no launch tells the host's threads a row: the search (which needs a spec anyway) is not told a ratio of guesses
    ctx = open_kernel(SAMPLES / "head_rms_norm.cu", "head_rms_norm_kernel")
    variants, _ = propose_variants(ctx.template_model, "head_rms_norm_kernel", None)
    workers = next(p for v in variants if v.name == "row_reduce" for p in v.params if p.name == "ROW_WORKERS")
    assert workers.try_first is None


# planted wrong: the butterfly over the whole warp, as if a row were one, mixing the rows that share it
WARP_WIDE = (
    "for (int o = CutuneW / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(cutune_mask, v, o, CutuneW));",
    "for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(cutune_mask, v, o, 32));",
)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("planted", [False, True])
def test_rows_of_fewer_threads_than_a_warp_equal_the_original_on_emulated_blocks(planted: bool, tmp_path: Path) -> None:
    path = SAMPLES / "constexpr_layer_norm.cu"
    combined = _combined(
        path, "layer_norm_kernel", {"T": "float", "kOnePassVariance": "true"}, {"tokens": 8, "hidden": 100}
    )
    names = [v.name for v in combined.variants]
    default = combined.template.space.default()
    configs = [default] + [
        {**default, "VARIANT": 1 + names.index(n), "ROW_THREADS": t, "ROW_VEC": v}
        | ({"ITEMS_Y": r} if n == "row_reduce_block_items" else {})
        for n, t, r, v in SHORT_POINTS
    ]
    source, expressions = emulated_unit(combined, path, "layer_norm_kernel", configs, tmp_path)
    runs = "\n".join(
        f'  std::printf("{i} %g\\n", worst(run({e}, {t}, {r})));'
        for i, ((_, t, r, _), e) in enumerate(zip(SHORT_POINTS, expressions[1:], strict=True))
    )
    source = source.replace(*WARP_WIDE) if planted else source
    assert source.count(WARP_WIDE[1]) == planted
    (tmp_path / "emulated.cpp").write_text(source + SHORT_HARNESS.format(original=expressions[0], runs=runs))
    worst = emulated(tmp_path)
    assert sorted(worst) == list(range(len(SHORT_POINTS)))
    # outputs of size ~3: a sum in another order moves them by float32 roundings, a row's lanes mixed by far more
    wrong = {SHORT_POINTS[i] for i, d in worst.items() if d >= 1e-4}
    # planted: every row of fewer than 32 threads is wrong (in the half-warp blocks, partners past the block hold
    # none of its values), the row of a whole warp right
    assert wrong == ({p for p in SHORT_POINTS if p[1] < 32} if planted else set()), worst


def test_a_persistent_loops_short_rows_share_a_block_in_groups() -> None:
    # QK norm, a warp per head on (32, 4) blocks over a persistent grid: its rows go on y again, ROWS_PER_BLOCK a
    # group, every row of the block looping alike (its barriers)
    ctx = open_kernel(SAMPLES / "head_rms_norm.cu", "head_rms_norm_kernel")
    variants, _ = propose_variants(ctx.template_model, "head_rms_norm_kernel", ctx.require_spec())
    variant = next(v for v in variants if v.name == "row_reduce")
    body = variant.body
    loop = "for (unsigned int cutune_rows_i = blockIdx.x; cutune_rows_i * ROWS_PER_BLOCK < (tokens * heads);"
    assert loop in body
    assert "const unsigned int cutune_row = cutune_rows_i * ROWS_PER_BLOCK + threadIdx.y;" in body
    assert "const bool cutune_row_ok = static_cast<int>(cutune_row) < static_cast<int>(tokens * heads);" in body
    assert variant.launch is not None
    # the host's workers, or 2 to 16 times as many (a launch parameter: no recompile), ROWS_PER_BLOCK a block
    assert variant.launch.grid[0] == "ceil_div((({grid.x}) * ({block.y})) * ROW_WORKERS, ROWS_PER_BLOCK)"
    workers = next(p for p in variant.params if p.name == "ROW_WORKERS")
    assert (workers.values, workers.default, workers.binding) == ((1, 2, 4, 8, 16), 1, Binding.LAUNCH)
    assert variant.launch.block == ("ROW_THREADS", "ROWS_PER_BLOCK")
    assert "ROW_THREADS * ROWS_PER_BLOCK >= warp_size" in variant.constraints
    # heads of 16 and 72 packs (the spec's kPack = 8 counts): no more threads a head than the longest has packs
    assert variant.params[0].values == (8, 16, 32, 64)
    # its row's packs, (head_dim + kPack - 1) / kPack, are known at compile time where head_dim is specialised
    ct = "constexpr int cutune_len_ct = ((HEAD_DIM_CT > 0) ? (((HEAD_DIM_CT) + (kPack) - 1) / (kPack)) : 0);"
    assert ct in body


# the QK-norm sample at float on the host: the original's warp a head on (32, 4) blocks, then row_reduce's heads of
# fewer threads than a warp, several a warp, over the persistent grid (a ragged last group: 35 heads)
HEAD_HARNESS = """
#include <random>
int main() {{
  const unsigned tokens = 5, heads = 7, head_dim = 72;
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> in(tokens * heads * head_dim), gamma(head_dim);
  for (auto& v : in) v = normal(rng);
  for (auto& v : gamma) v = normal(rng);
  auto run = [&](auto kernel, unsigned threads, unsigned rows = 0, unsigned times = 1) {{
    std::vector<float> out(in.size(), -1e30f);
    const unsigned workers = std::min(1024u, (tokens * heads + 3) / 4) * 4;  // the original's warps
    const unsigned grid = rows ? (workers * times + rows - 1) / rows : workers / 4;
    launch(grid, 1, rows ? threads : 32, rows ? rows : 4, [&] {{
      kernel(out.data(), in.data(), gamma.data(), tokens, heads, head_dim, 1e-6f);
    }});
    return out;
  }};
""" + COMPARED.replace("run({original}, 1024)", "run({original}, 32)")
# (threads a head, heads a block, head_dim compiled in: its packs then kept in registers in one pass, the host's
# workers times this)
HEAD_POINTS = [
    (8, 4, False, 1),
    (8, 8, True, 4),
    (16, 2, False, 2),
    (16, 8, True, 8),
    (32, 1, False, 4),
    (32, 4, True, 2),
]


# planted wrong: every row of a group the group's first
FIRST_OF_GROUP = ("cutune_rows_i * ROWS_PER_BLOCK + threadIdx.y;", "cutune_rows_i * ROWS_PER_BLOCK;")


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("planted", [False, True])
def test_a_persistent_loops_grouped_rows_equal_the_original_on_emulated_blocks(planted: bool, tmp_path: Path) -> None:
    path = SAMPLES / "head_rms_norm.cu"
    combined = _combined(
        path, "head_rms_norm_kernel", {"kPack": "4", "T": "float"}, {"tokens": 5, "heads": 7, "head_dim": 72}
    )
    k = 1 + [v.name for v in combined.variants].index("row_reduce")
    default = combined.template.space.default()
    configs = [default] + [
        {**default, "VARIANT": k, "ROW_THREADS": t, "ROWS_PER_BLOCK": r, "SPECIALIZE_HEAD_DIM": c}
        for t, r, c, _ in HEAD_POINTS
    ]
    source, expressions = emulated_unit(combined, path, "head_rms_norm_kernel", configs, tmp_path)
    runs = "\n".join(
        f'  std::printf("{i} %g\\n", worst(run({e}, {t}, {r}, {w})));'
        for i, ((t, r, _, w), e) in enumerate(zip(HEAD_POINTS, expressions[1:], strict=True))
    )
    assert sum(", 0, 0, 72, " in e for e in expressions) == 3  # head_dim compiled in where asked
    source = source.replace(*FIRST_OF_GROUP) if planted else source
    assert (FIRST_OF_GROUP[1] in source) is planted
    (tmp_path / "emulated.cpp").write_text(source + HEAD_HARNESS.format(original=expressions[0], runs=runs))
    worst = emulated(tmp_path)
    assert sorted(worst) == list(range(len(HEAD_POINTS)))
    wrong = {HEAD_POINTS[i] for i, d in worst.items() if d >= 1e-4}
    assert wrong == ({p for p in HEAD_POINTS if p[1] > 1} if planted else set()), worst


@pytest.mark.gpu
def test_a_persistent_loops_grouped_rows_equal_the_original_on_the_gpu() -> None:
    # every threads a head × heads a block × workers at the spec's sizes (bf16 heads of 128 and of 576, 15 heads on
    # 16 warps)
    ctx = open_kernel(SAMPLES / "head_rms_norm.cu", "head_rms_norm_kernel")
    variants, _ = propose_variants(ctx.template_model, "head_rms_norm_kernel", ctx.require_spec())
    variant = next(v for v in variants if v.name == "row_reduce")
    job = variant_alone(ctx, "head_rms_norm_kernel", variant)
    varied = {"VARIANT", "ROW_THREADS", "ROWS_PER_BLOCK", "ROW_WORKERS"}
    passed, failed = measured_failures(job, ctx.require_spec(), varied)
    # 13 feasible (threads a head, heads a block) × 5 worker counts, and the original
    assert passed >= 66 and not failed, failed


def _struct_softmax(old: str = "", new: str = "") -> Variant:
    """struct_softmax.cu's row_reduce variant (its source edited from `old` to `new` first)."""
    ctx = open_kernel(SAMPLES / "struct_softmax.cu", "struct_softmax_kernel")
    model = parse_source(ctx.template.source.replace(old, new), str(ctx.path))
    return RowReduce().apply(model, "struct_softmax_kernel", ctx.require_spec())


def test_a_run_time_length_the_launch_shares_keeps_the_row_in_registers_where_it_fits() -> None:
    """The row length is a member of a struct passed by value: no size to compile in, so the row's code is written
    twice, in its one-pass form for rows of at most ROW_CAP packs a thread and as two passes for longer ones."""
    variant = _struct_softmax()
    assert [p.name for p in variant.params][-1] == "ROW_CAP" and variant.params[-1].default == 0
    assert "ROW_CAP * ROW_VEC <= 64" in variant.constraints
    fits, _, rest = variant.body.partition("if (ROW_CAP > 0 && cutune_len <= ROW_CAP * cutune_step) {")
    assert "const int cutune_len = cols;" in fits and rest
    one_pass, _, two_passes = rest.partition("} else {")
    assert one_pass.startswith("\nconstexpr int cutune_len_max = ROW_CAP * cutune_step;")
    assert two_passes.startswith("\nconstexpr int cutune_len_max = 0;")
    # the same row code in both: only the longest row it is written for differs
    assert one_pass.split("\n", 2)[2] == two_passes.rstrip().removesuffix("}").split("\n", 2)[2]
    # a length compiled in (a sample that passes it as a size, specialised) needs no cap
    ctx = open_kernel(SAMPLES / "rms_norm.cu", "rms_norm_kernel")
    variants, _ = propose_variants(ctx.template_model, "rms_norm_kernel", ctx.require_spec())
    specialised = next(v for v in variants if v.name == "row_reduce")
    assert "ROW_CAP" not in {p.name for p in specialised.params} and "cutune_len <= ROW_CAP" not in specialised.body
    assert "cutune_len_max = cutune_len_ct;" in specialised.body


@pytest.mark.parametrize(
    "length",
    [
        "p.cols - static_cast<int>(blockIdx.x % 2)",  # rows of two lengths: a block's rows may differ
        "x[0] > 0.0f ? p.cols : 0",  # read from memory
    ],
)
def test_a_length_not_one_for_the_whole_launch_gets_no_cap(length: str) -> None:
    variant = _struct_softmax("const int cols = p.cols;", f"const int cols = {length};")
    assert "ROW_CAP" not in {p.name for p in variant.params} and "cutune_len <= ROW_CAP" not in variant.body


@pytest.mark.nvcc
@needs_nvrtc
def test_a_row_kept_in_registers_up_to_a_cap_compiles_with_nvcc_and_nvrtc(tmp_path: Path) -> None:
    ctx = open_kernel(SAMPLES / "struct_softmax.cu", "struct_softmax_kernel")
    spec = ctx.require_spec()
    template, _ = with_variants(
        ctx.template_model, "struct_softmax_kernel", [_struct_softmax()], spec, base=ctx.template
    )
    default = template.space.default()
    configs = [
        {**default, "VARIANT": 1, "ROW_THREADS": threads, "ROW_VEC": vec, "ROW_CAP": cap}
        for threads, vec, cap in ((128, 4, 0), (128, 4, 1), (64, 2, 16), (256, 4, 8))
    ]
    expressions = name_expressions(template, spec, configs)
    nvcc_names, nvrtc_names = compile_both(template, expressions, tmp_path)
    assert set(nvrtc_names) == set(expressions) and set(nvrtc_names.values()) <= set(nvcc_names)


@pytest.mark.gpu
def test_a_row_kept_in_registers_up_to_a_cap_equals_the_original_on_the_gpu() -> None:
    """Every threads × pack width × cap equals the original, at rows that fit some caps and not others (64 to 4,000
    floats); a planted form that takes the one-pass branch whatever the length (the cap's check dropped) is caught at
    the rows longer than its cap."""
    ctx = open_kernel(SAMPLES / "struct_softmax.cu", "struct_softmax_kernel")
    spec = ctx.require_spec()
    vary = {"VARIANT", "ROW_THREADS", "ROW_VEC", "ROW_CAP"}
    passed, failed = measured_failures(variant_alone(ctx, "struct_softmax_kernel", _struct_softmax()), spec, vary)
    assert passed >= 40 and not failed
    planted = _struct_softmax()
    planted = replace(
        planted, body=planted.body.replace("ROW_CAP > 0 && cutune_len <= ROW_CAP * cutune_step", "ROW_CAP > 0")
    )
    assert planted.body != _struct_softmax().body
    _, wrong = measured_failures(variant_alone(ctx, "struct_softmax_kernel", planted), spec, {"VARIANT", "ROW_CAP"})
    assert wrong and all("'ROW_CAP': 0" not in w for w in wrong)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("stem", "kernel"),
    [
        ("offset_rms_norm", "offset_rms_norm_kernel"),  # a length over the pack width: not compiled in
        ("offset_rms_norm", "offset_add_rms_norm_kernel"),
        ("packed_add_rms_norm", "packed_add_rms_norm_kernel"),
        ("packed_add_rms_norm", "packed_add_rms_norm_quant_kernel"),
        ("template_softmax", "template_softmax_kernel"),  # the length through a template-flag ternary
        ("vec_rms_norm", "vec_rms_norm_kernel"),
        ("while_softmax_backward", "softmax_backward_long_kernel"),
    ],
)
def test_the_samples_rows_kept_in_registers_up_to_a_cap_equal_the_original_on_the_gpu(stem: str, kernel: str) -> None:
    """The samples whose row length their spec's sizes cannot compile in: every cap at the variant's defaults, at
    every size of the spec, equal to the original."""
    ctx = open_kernel(SAMPLES / f"{stem}.cu", kernel)
    variants, _ = propose_variants(ctx.template_model, kernel, ctx.require_spec())  # read as templatize reads it
    variant = next(v for v in variants if v.name == "row_reduce")
    assert "ROW_CAP" in {p.name for p in variant.params}
    passed, failed = measured_failures(variant_alone(ctx, kernel, variant), ctx.require_spec(), {"VARIANT", "ROW_CAP"})
    assert passed >= 6 and not failed
