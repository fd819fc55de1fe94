"""The samples written in the shapes the canonical forms exist for: every transform that applies after
canonicalisation, and each variant compiled with nvcc and NVRTC at several configurations."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cutune.project import KernelContext, open_kernel
from cutune.template.variants import VARIANT, combine_all
from tests.cuda.test_extract import needs_nvrtc
from tests.template.variants.compile import assert_compiles

from .samples import SAMPLES

CASES = {
    # a gated activation whose row loop sits in a __device__ template taking the activation as a function pointer
    ("gated_helper.cu", "gated_act_kernel"): {
        "split_vectorized": [{"SPLIT": 4, "VEC_BYTES": 16, "PACKS": 2, "BLOCK_DIV": 4}],
        "split_packs_per_thread": [{"SPLIT": 1, "ITEMS": 4}],
        "split": [{"SPLIT": 8}],
        "block_items": [{"ITEMS_Y": 4}],
    },
    # one element per thread, an early return past the end
    ("bias_gelu.cu", "bias_gelu_kernel"): {
        "vectorized": [
            {"VEC_BYTES": 16, "PACKS": 2, "BLOCK_DIV": 4},
            {"VEC_BYTES": 8},
            {"VEC_BYTES": 16, "PACKS": 4, "GRID_DIV": 16},  # fewer blocks: each thread several packs in flight
        ],
        "packs_per_thread": [{"ITEMS": 4, "ITEMS_BLOCK_DIV": 4}, {"ITEMS": 8, "ITEMS_GRID_DIV": 32}],
        "persistent_grid": [{"BLOCKS_PER_SM": 4}],
        "flat_rows": [  # `bias[i % d]`: the remainder once a row
            {"FLAT_ROW_THREADS": 64, "FLAT_ITEMS": 2, "FLAT_BLOCKS_PER_SM": 8},
            {"FLAT_ROW_THREADS": 512, "FLAT_ITEMS": 8, "FLAT_SPLIT": 8, "FLAT_BLOCKS_PER_SM": 1},
            {"FLAT_ROW_THREADS": 128, "FLAT_ITEMS": 2, "FLAT_VEC": 8, "FLAT_BLOCKS_PER_SM": 4},  # 16-byte packs
        ],
    },
    # a grid-stride loop written through a macro from a project header beside the file
    ("scaled_residual.cu", "scaled_residual_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2, "BLOCK_DIV": 4}, {"VEC_BYTES": 8}],
        "packs_per_thread": [{"ITEMS": 4, "ITEMS_BLOCK_DIV": 2, "ITEMS_GRID_DIV": 4}],
        "persistent_grid": [{"BLOCKS_PER_SM": 8}],
    },
    # a persistent loop over rows, block-stride loops and a block reduction inside
    ("persistent_rms_norm.cu", "persistent_rms_norm_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}],
        "packs_per_thread": [{"ITEMS": 4}],
        "row_reduce": [{"ROW_THREADS": 128, "ROW_VEC": 8}, {"ROW_THREADS": 256, "ROW_VEC": 4}],
    },
    # a norm that already reads 16-byte pack structs
    ("vec_rms_norm.cu", "vec_rms_norm_kernel"): {
        "vectorized": [{"VEC_BYTES": 16}],
        "packs_per_thread": [{"ITEMS": 2}],
        "row_reduce_block_items": [{"ROW_THREADS": 128, "ROW_VEC": 8, "ITEMS_Y": 2}],
        "row_reduce": [{"ROW_THREADS": 128, "ROW_VEC": 8}, {"ROW_THREADS": 512, "ROW_VEC": 4}],
        # a block reduction through shared memory: each item of a block its own copy of the partials
        "block_items": [{"ITEMS_Y": 2}, {"ITEMS_Y": 8}],
    },
    # a fused add + norm over pack structs with their own `+=`, each pack named through 64-bit locals of the loop's
    # index (`id`, `strided_id`: the input rows strided), compile-time checks before the loops
    ("packed_add_rms_norm.cu", "packed_add_rms_norm_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}],
        "packs_per_thread": [{"ITEMS": 2}],
        "row_reduce_block_items": [{"ROW_THREADS": 128, "ROW_VEC": 8, "ITEMS_Y": 2}],
        "row_reduce": [{"ROW_THREADS": 128, "ROW_VEC": 8}, {"ROW_THREADS": 512, "ROW_VEC": 4}],
    },
    # and a static int8 quantisation fused in, each pack's values written one by one at `out[id * WIDTH + j]`
    ("packed_add_rms_norm.cu", "packed_add_rms_norm_quant_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}],
        "packs_per_thread": [{"ITEMS": 2}],
        "row_reduce_block_items": [{"ROW_THREADS": 128, "ROW_VEC": 8, "ITEMS_Y": 2}],
        "row_reduce": [{"ROW_THREADS": 128, "ROW_VEC": 8}, {"ROW_THREADS": 512, "ROW_VEC": 2}],
    },
    # a bf16 stub before sm_80 whose `if constexpr` opens in one `#if` and closes in another (read as the sm_90 device
    # pass reads it; row_reduce's new body kept inside the guard), finished rows skipped by an early return
    ("arch_guard_rms_norm.cu", "arch_guard_rms_norm_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}, {"VEC_BYTES": 8}],
        "packs_per_thread": [{"ITEMS": 4}],
        "row_reduce_block_items": [{"ROW_THREADS": 256, "ROW_VEC": 8, "ITEMS_Y": 2}],
        "row_reduce": [{"ROW_THREADS": 256, "ROW_VEC": 8}, {"ROW_THREADS": 1024, "ROW_VEC": 4}],
    },
    # packs walked from a thread offset, summed by a helper and reduced by a block-sum helper with shared memory (its
    # row_reduce variants also run on the GPU: test_row_reduce.py, gpu_batch.sh's row_reduce_packs step)
    ("offset_rms_norm.cu", "offset_rms_norm_kernel"): {
        "packs_per_thread": [{"ITEMS": 4}],
        "row_reduce_block_items": [{"ROW_THREADS": 64, "ROW_VEC": 1, "ITEMS_Y": 2}],
        "row_reduce": [{"ROW_THREADS": 64, "ROW_VEC": 1}, {"ROW_THREADS": 1024, "ROW_VEC": 1}],
        # a block reduction through shared memory: each item of a block its own copy of the partials
        "block_items": [{"ITEMS_Y": 2}, {"ITEMS_Y": 8}],
    },
    # and the row staged in dynamic shared memory at `&staged[offset]`, a cast of the array
    ("offset_rms_norm.cu", "offset_add_rms_norm_kernel"): {
        "packs_per_thread": [{"ITEMS": 2}],
        "row_reduce_block_items": [{"ROW_THREADS": 32, "ROW_VEC": 1, "ITEMS_Y": 2}],
        "row_reduce": [{"ROW_THREADS": 32, "ROW_VEC": 1}, {"ROW_THREADS": 512, "ROW_VEC": 1}],
        # each item its slice of the dynamic shared memory, through the cast too
        "block_items": [{"ITEMS_Y": 2}, {"ITEMS_Y": 4}],
    },
    # a softmax stepping by its compile-time block size, which its cub::BlockReduce fixes (no launch in the file)
    ("block_threads_softmax.cu", "block_softmax_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}],
        "packs_per_thread": [{"ITEMS": 4}],
        "row_reduce_block_items": [{"ROW_THREADS": 1024, "ROW_VEC": 4, "ITEMS_Y": 2}],
        "row_reduce": [{"ROW_THREADS": 1024, "ROW_VEC": 4}, {"ROW_THREADS": 1024, "ROW_VEC": 2}],
    },
    # slices of a row placed by blockIdx.y, the blocks whose slice starts past the row's end leaving first (the slice
    # width from ceil_div, round_up and sizeof: the same for every thread of a block)
    ("slice_softmax.cu", "slice_softmax_stats_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}],
        "packs_per_thread": [{"ITEMS": 4}],
        "row_reduce": [{"ROW_THREADS": 256, "ROW_VEC": 4}, {"ROW_THREADS": 64, "ROW_VEC": 2}],
    },
    # rows on y walked by `while` loops over one index, restarted before the second pass
    ("while_softmax_backward.cu", "softmax_backward_long_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}],
        "packs_per_thread": [{"ITEMS": 2}],
        "row_reduce": [{"ROW_THREADS": 64, "ROW_VEC": 4}, {"ROW_THREADS": 256, "ROW_VEC": 2}],
    },
    # an online softmax reducing each round's maximum over the block: the rounds' reductions merged once after the loop,
    # and the row read once, by the statistics' pass, and kept in registers for the normalising one (32 rounds: every
    # size but the 126-round one; 2: only the one-round size)
    ("online_softmax.cu", "online_softmax_kernel"): {
        "online_merge_row_cache": [{"ROW_CACHE_ROUNDS": 32}, {"ROW_CACHE_ROUNDS": 2}],
        "online_merge": [{}],
        "row_cache": [{"ROW_CACHE_ROUNDS": 8}],
    },
    # rows on y numbered by the most rows a block may hold (a template count), a small batch on a block of fewer rows:
    # the block's y axis moved onto the grid
    ("grouped_rms_norm.cu", "grouped_rms_norm_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}],
        "packs_per_thread": [{"ITEMS": 4}],
        "row_reduce": [{"ROW_THREADS": 32, "ROW_VEC": 8}, {"ROW_THREADS": 128, "ROW_VEC": 2}],
    },
    # and the count an argument, a row's two warps meeting in the row's own slice of shared memory
    ("grouped_rms_norm.cu", "grouped_softmax_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}],
        "packs_per_thread": [{"ITEMS": 4}],
        "row_reduce": [{"ROW_THREADS": 64, "ROW_VEC": 4}, {"ROW_THREADS": 256, "ROW_VEC": 1}],
    },
    # a warp per row stepping by a project macro (`WARP_SIZE`) the launch gives the block too
    ("warp_l2_norm.cu", "l2_norm_rows_f32"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}],
        "packs_per_thread": [{"ITEMS": 4}],
        "row_reduce_block_items": [{"ROW_THREADS": 64, "ROW_VEC": 4, "ITEMS_Y": 2}],
        "row_reduce": [{"ROW_THREADS": 64, "ROW_VEC": 4}, {"ROW_THREADS": 256, "ROW_VEC": 2}],
        "block_items": [{"ITEMS_Y": 4}],
    },
    # a LayerNorm whose variance pass is chosen by `if constexpr` on a template parameter, around the row loops (the
    # GPU test runs both arms); the hidden size specialised gives the one-pass register form in each arm
    ("constexpr_layer_norm.cu", "layer_norm_kernel"): {
        # two 16-byte packs take 71 registers: too many for the spec's 1024 threads (H200), unless capped
        "vectorized": [
            {"VEC_BYTES": 16, "PACKS": 2, "MAXRREGCOUNT": 64},
            {"VEC_BYTES": 16, "PACKS": 1, "MAXRREGCOUNT": 64},
        ],
        "packs_per_thread": [{"ITEMS": 4}],
        "row_reduce_block_items": [{"ROW_THREADS": 256, "ROW_VEC": 8, "ITEMS_Y": 2}],
        "row_reduce": [
            {"ROW_THREADS": 256, "ROW_VEC": 8},
            {"ROW_THREADS": 1024, "ROW_VEC": 4},
            {"ROW_THREADS": 512, "ROW_VEC": 8, "SPECIALIZE_HIDDEN": True},
        ],
        # a block reduction through shared memory: each item of a block its own copy of the partials
        "block_items": [{"ITEMS_Y": 2}, {"ITEMS_Y": 8}],
    },
    # an fp16 row held in registers by rounds of a 1024-thread block: the column rebuilt from warp and lane, exits at
    # the row's end (`break`, `return`), an fmaf accumulation, a second reduction level reading a partial per lane,
    # launched through a picker's function pointer on a block set member by member
    ("rounds_rms_norm.cu", "rounds_rms_norm_kernel"): {
        # fewer threads than the original's 1024: each holds more of the row (its arrays sized in ROW_THREADS' terms)
        "row_reduce_block_items": [{"ROW_THREADS": 1024, "ROW_VEC": 4, "ITEMS_Y": 2}],
        "row_reduce": [
            {"ROW_THREADS": 1024, "ROW_VEC": 4},
            {"ROW_THREADS": 256, "ROW_VEC": 8},
            {"ROW_THREADS": 64, "ROW_VEC": 4},
        ],
        # a block reduction through shared memory: each item of a block its own copy of the partials
        "block_items": [{"ITEMS_Y": 2}, {"ITEMS_Y": 8}],
    },
    # a flat index over a strided 4-D copy split by division and remainder, one element per thread: the divisions
    # once a row
    ("strided_copy.cu", "strided_copy_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}],
        "packs_per_thread": [{"ITEMS": 4}],
        "persistent_grid": [{"BLOCKS_PER_SM": 4}],
        "flat_rows": [
            {"FLAT_ROW_THREADS": 32, "FLAT_ITEMS": 1, "FLAT_BLOCKS_PER_SM": 8},
            {"FLAT_ROW_THREADS": 128, "FLAT_ITEMS": 4, "FLAT_SPLIT": 4, "FLAT_BLOCKS_PER_SM": 2},
            {"FLAT_ROW_THREADS": 1024, "FLAT_ITEMS": 8, "FLAT_BLOCKS_PER_SM": 32},
            {"FLAT_ROW_THREADS": 64, "FLAT_ITEMS": 4, "FLAT_VEC": 4, "FLAT_SPLIT": 2, "FLAT_BLOCKS_PER_SM": 8},
        ],
    },
    # and a grid-stride loop of 32-bit indices whose row and column broadcast a scale and a bias
    ("strided_copy.cu", "scale_bias_residual_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}],
        "packs_per_thread": [{"ITEMS": 4}],
        "persistent_grid": [{"BLOCKS_PER_SM": 4}],
        "flat_rows": [
            {"FLAT_ROW_THREADS": 256, "FLAT_ITEMS": 2, "FLAT_BLOCKS_PER_SM": 4},
            {"FLAT_ROW_THREADS": 64, "FLAT_ITEMS": 8, "FLAT_SPLIT": 16, "FLAT_BLOCKS_PER_SM": 1},
            {"FLAT_ROW_THREADS": 256, "FLAT_ITEMS": 1, "FLAT_VEC": 4, "FLAT_BLOCKS_PER_SM": 4},
        ],
    },
    # one element per thread indexed by the grid's rank as a cooperative group, past an early return (1-D launches)
    ("group_rank_adam.cu", "group_rank_adam_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}, {"VEC_BYTES": 8, "BLOCK_DIV": 2}],
        "packs_per_thread": [{"ITEMS": 4, "ITEMS_GRID_DIV": 8}],
        "persistent_grid": [{"BLOCKS_PER_SM": 4}],
    },
    # and a grid-stride loop stepping by the grid group's size
    ("group_rank_adam.cu", "group_clamp_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 4}],
        "packs_per_thread": [{"ITEMS": 2}],
        "persistent_grid": [{"BLOCKS_PER_SM": 2}],
    },
    # one element per thread whose bounds check is on its row, the flat index divided by the row length (64-bit,
    # with a row mask's early return)
    ("masked_rows.cu", "masked_row_scale_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}, {"VEC_BYTES": 8, "BLOCK_DIV": 2}],
        "packs_per_thread": [{"ITEMS": 4, "ITEMS_GRID_DIV": 8}],
        "persistent_grid": [{"BLOCKS_PER_SM": 4}],
        "flat_rows": [
            {"FLAT_ROW_THREADS": 128, "FLAT_ITEMS": 4, "FLAT_BLOCKS_PER_SM": 8},
            {"FLAT_ROW_THREADS": 256, "FLAT_ITEMS": 2, "FLAT_VEC": 4, "FLAT_SPLIT": 4, "FLAT_BLOCKS_PER_SM": 2},
        ],
    },
    # and the whole body inside `if (row < rows) {...}` (32-bit unsigned)
    ("masked_rows.cu", "column_bias_copy_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 4}],
        "packs_per_thread": [{"ITEMS": 2}],
        "persistent_grid": [{"BLOCKS_PER_SM": 2}],
    },
    # per-element helpers that return early (an expert id out of range, a weight not served here), inlined with
    # their returns written as a result local; the counting kernel's one unconditional read is the helper's
    ("expert_ids.cu", "map_expert_ids_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}, {"VEC_BYTES": 8, "GRID_DIV": 4}],
        "packs_per_thread": [{"ITEMS": 4}],
        "persistent_grid": [{"BLOCKS_PER_SM": 4}],
    },
    ("expert_ids.cu", "count_expert_tokens_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}, {"VEC_BYTES": 16, "PACKS": 4, "GRID_DIV": 2}],
        "packs_per_thread": [{"ITEMS": 4}],
        "persistent_grid": [{"BLOCKS_PER_SM": 2}],
    },
    # a grid-stride loop over points per (channel, batch) of the grid's y and z, whose first statement leaves on a
    # batch or channel past the tensor's: that exit moved before the loop; the interpolation's grid rounds its
    # channels up, so the exit is taken at every size there
    ("batched_points.cu", "gather_points_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}, {"VEC_BYTES": 8, "BLOCK_DIV": 2}],
        "packs_per_thread": [{"ITEMS": 4, "ITEMS_BLOCK_DIV": 2}],
    },
    ("batched_points.cu", "three_interpolate_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}, {"VEC_BYTES": 16, "BLOCK_DIV": 4}],
        "packs_per_thread": [{"ITEMS": 2}, {"ITEMS": 4, "ITEMS_BLOCK_DIV": 4}],
    },
    # one byte a thread whose codes go to planes a whole plane apart (`out[idx + total]`, `planes[3 * n + i]`):
    # vectorize stores each plane as packs, the planes' packs never meeting
    ("unpack_planes.cu", "dequant_nibble_planes_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}, {"VEC_BYTES": 8, "BLOCK_DIV": 4}],
        "packs_per_thread": [{"ITEMS": 4}],
        "persistent_grid": [{"BLOCKS_PER_SM": 4}],
        "flat_rows": [{"FLAT_ROW_THREADS": 128, "FLAT_ITEMS": 4}],
    },
    # a row staged in dynamic shared memory: under block_items each item (row of threads along y) gets its own
    # slice of it, the launch's bytes rounded up to 128 an item; 333 rows at ITEMS_Y 2 and 4 keep one row a block
    ("staged_softmax.cu", "staged_softmax_kernel"): {
        "vectorized": [{"VEC_BYTES": 16}],
        "packs_per_thread": [{"ITEMS": 2}],
        # row_reduce keeps each thread's packs staged at the element, one row a block (77 columns: a ragged tail)
        "row_reduce_block_items": [{"ROW_THREADS": 256, "ROW_VEC": 4, "ITEMS_Y": 2}],
        "row_reduce": [{"ROW_THREADS": 256, "ROW_VEC": 4}, {"ROW_THREADS": 32, "ROW_VEC": 1}],
        "block_items": [{"ITEMS_Y": 2}, {"ITEMS_Y": 4}, {"ITEMS_Y": 8}],
    },
    # llama.cpp's attention-softmax shape: constants of the instantiation pick the row length, the block size and
    # where the row is staged; rounds counted by their offset with an exit past the row's end; every variant is read
    # at the spec's instantiation (the others run the original body)
    ("template_softmax.cu", "template_softmax_kernel"): {
        "vectorized": [{"VEC_BYTES": 16}],
        "packs_per_thread": [{"ITEMS": 2}],
        "row_reduce_block_items": [{"ROW_THREADS": 32, "ROW_VEC": 4, "ITEMS_Y": 2}],
        "row_reduce": [{"ROW_THREADS": 32, "ROW_VEC": 4}, {"ROW_THREADS": 64, "ROW_VEC": 1}],
        "block_items": [{"ITEMS_Y": 2}],
    },
    # FasterTransformer's three-pass LayerNorm: `uint` offsets into the row, the block reduction from a project
    # header (inlined from it), one local reused as the last pass's temporary; row_reduce reads the row once
    ("three_pass_layer_norm.cu", "three_pass_layer_norm_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}],
        "packs_per_thread": [{"ITEMS": 2}],
        "row_reduce_block_items": [{"ROW_THREADS": 256, "ROW_VEC": 4, "ITEMS_Y": 2}],
        "row_reduce": [{"ROW_THREADS": 256, "ROW_VEC": 4}, {"ROW_THREADS": 1024, "ROW_VEC": 1}],
        "block_items": [{"ITEMS_Y": 2}, {"ITEMS_Y": 4}],
    },
    ("unpack_planes.cu", "split_crumb_planes_kernel"): {
        "vectorized": [{"VEC_BYTES": 16, "PACKS": 2}, {"VEC_BYTES": 4, "GRID_DIV": 4}],
        "packs_per_thread": [{"ITEMS": 4}],
        "persistent_grid": [{"BLOCKS_PER_SM": 2}],
    },
}

# samples whose kernel branches by `if constexpr` on a template parameter around its row loops: each variant is also
# compiled (and on the GPU, checked) at the instantiation taking the other arm than the spec's
OTHER_ARMS = {
    ("constexpr_layer_norm.cu", "layer_norm_kernel"): {"kOnePassVariance": "false"},
    ("rounds_rms_norm.cu", "rounds_rms_norm_kernel"): {"ROUNDS": "8"},  # rows of up to 8192: rounds left unused
}
# every instantiation the tests compile and check: the spec's, then the other arms
INSTANTIATIONS = [(*case, {}) for case in CASES] + [(*case, args) for case, args in OTHER_ARMS.items()]


def spec_context(file: str, kernel: str, template_args: dict[str, str]) -> KernelContext:
    """The sample's kernel with its spec, the spec's template arguments replaced by `template_args` where it names
    them."""
    ctx = open_kernel(SAMPLES / file, kernel)
    assert ctx.spec is not None
    args = {**ctx.spec.template_args, **template_args}
    return dataclasses.replace(ctx, spec=dataclasses.replace(ctx.spec, template_args=args))


def _combined(file: str, kernel: str, template_args: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    ctx = spec_context(file, kernel, template_args or {})
    return combine_all(ctx.template_model, kernel, ctx.template, ctx.spec)


@pytest.mark.parametrize(("file", "kernel"), list(CASES))
def test_the_sample_gets_the_variants_its_canonical_form_allows(file: str, kernel: str) -> None:
    combined = _combined(file, kernel)
    assert [v.name for v in combined.variants] == list(CASES[file, kernel])


def test_the_helpers_loop_is_inlined_with_the_activation_passed_through() -> None:
    vectorized = _combined("gated_helper.cu", "gated_act_kernel").variants[0]
    assert "act_and_mul_row<" not in vectorized.body
    assert "(Act)(" in vectorized.body  # the function-pointer template parameter, substituted into the call


@pytest.mark.nvcc
@needs_nvrtc
@pytest.mark.parametrize(("file", "kernel", "template_args"), INSTANTIATIONS)
def test_every_variant_compiles_with_nvcc_and_nvrtc(
    file: str, kernel: str, template_args: dict[str, str], tmp_path: Path
) -> None:
    combined = _combined(file, kernel, template_args)
    assert combined.spec is not None
    default = combined.template.space.default()
    configs = [{**default, VARIANT: 0}] + [
        {**default, VARIANT: k, **values}
        for k, variant in enumerate(combined.variants, 1)
        for values in CASES[file, kernel][variant.name]
    ]
    assert_compiles(combined.template, [combined.spec], configs, tmp_path, SAMPLES / file)
