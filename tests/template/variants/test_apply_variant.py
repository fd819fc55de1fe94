"""Writing the winning variant for real: its body in the kernel, and, where its launch differs, the host
launch rewritten in the host's own terms (grid/block variables, tuning-struct values), so that the file
nvcc compiles launches what was measured."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cutune.cuda.parse import parse_source
from cutune.project import open_kernel
from cutune.template.variants import GridShape, combine_all, keep_variant
from cutune.template.variants.host_launch import HostLaunchError, host_config

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
TORCH_STUB = Path(__file__).resolve().parent / "torch_stub"


def _kept(file: str, kernel: str, name: str, values: dict[str, int]) -> str:
    ctx = open_kernel(SAMPLES / file, kernel)
    combined = combine_all(ctx.template_model, kernel, ctx.template, ctx.spec)
    variant = next(v for v in combined.variants if v.name == name)
    return keep_variant(ctx.template_model, kernel, variant, values)


def _nvcc_whole_file(text: str, tmp_path: Path) -> None:
    source = tmp_path / "applied.cu"
    source.write_text(text)
    cmd = ["nvcc", "-std=c++17", "-arch=sm_90", "-c", f"-I{TORCH_STUB}", str(source), "-o", str(tmp_path / "a.o")]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.nvcc
def test_applied_split_vectorized_gated_sample_launches_its_grid_and_compiles_with_stubbed_torch_headers(
    tmp_path: Path,
) -> None:
    kept = _kept("gated_activation.cu", "act_and_mul_kernel", "split_vectorized", {"SPLIT": 4, "BLOCK_DIV": 2})
    struct = "serving::act_and_mul_kernel_tuning"
    assert "static constexpr int SPLIT = 4;" in kept and "static constexpr int BLOCK_DIV = 2;" in kept
    assert f"<<<dim3(dim3(grid).x, {struct}::SPLIT), " in kept
    assert f"(dim3(block).x / {struct}::BLOCK_DIV)" in kept and ", 0, stream>>>(" in kept
    assert "for (long long cutune_vec_p00 = blockIdx.y * blockDim.x + threadIdx.x;" in kept
    _nvcc_whole_file(kept, tmp_path)


@pytest.mark.nvcc
def test_applied_split_rotary_sample_compiles_with_stubbed_torch_headers(tmp_path: Path) -> None:
    kept = _kept("rotary_embedding.cu", "rotary_embedding_kernel", "split_packs_per_thread", {"SPLIT": 8, "ITEMS": 4})
    assert "<<<dim3(dim3(grid).x, serving::rotary_embedding_kernel_tuning::SPLIT), " in kept
    _nvcc_whole_file(kept, tmp_path)


@pytest.mark.nvcc
def test_applied_vectorized_one_element_sample_launches_fewer_blocks_and_compiles(tmp_path: Path) -> None:
    # the one-element-per-thread guard read as a grid-stride loop: fewer blocks cover it, in the host's own terms
    kept = _kept("bias_gelu.cu", "bias_gelu_kernel", "vectorized", {"PACKS": 4, "GRID_DIV": 16})
    struct = "serving::bias_gelu_kernel_tuning"
    assert "static constexpr int GRID_DIV = 16;" in kept and "static constexpr int PACKS = 4;" in kept
    # max(1, ceil_div(grid, GRID_DIV)), the grid being the site's own (after the items_per_thread recipe's division)
    assert "<<<(1 > ((dim3((blocks + " in kept and f".x + {struct}::GRID_DIV - 1) / {struct}::GRID_DIV) ? 1 : " in kept
    _nvcc_whole_file(kept, tmp_path)


@pytest.mark.nvcc
def test_applied_block_items_gives_each_item_its_own_dynamic_shared_memory_at_the_launch(tmp_path: Path) -> None:
    kept = _kept("staged_softmax.cu", "staged_softmax_kernel", "block_items", {"ITEMS_Y": 4})
    assert "static constexpr int ITEMS_Y = 4;" in kept
    # the site's bytes rounded up to 128, times the items of the block, in the host's own terms
    assert "(((cols * sizeof(float)) + 128 - 1) / 128 * 128) * " in kept
    assert "auto& row_buf = cutune_item_dynamic(cutune_items_row_buf);" in kept
    _nvcc_whole_file(kept, tmp_path)


@pytest.mark.nvcc
def test_applied_block_items_runs_several_items_a_row_where_the_launch_divides_them(tmp_path: Path) -> None:
    kept = _kept("gated_activation.cu", "act_and_mul_kernel", "block_items", {"ITEMS_Y": 2, "ITEMS_T": 4})
    struct = "serving::act_and_mul_kernel_tuning"
    assert "static constexpr int ITEMS_Y = 2;" in kept and "static constexpr int ITEMS_T = 4;" in kept
    # the rows a block where the site's items divide into ITEMS_Y * ITEMS_T, the grid divided by both there
    y, t = f"{struct}::ITEMS_Y", f"{struct}::ITEMS_T"
    rows = f"((((dim3(grid).x % ({y} * {t})) == 0) && ((dim3(block).x * {y}) <= 1024)) ? {y} : 1)"
    grid = f"dim3((dim3(grid).x / (({rows} > 1) ? ({rows} * {t}) : 1)), dim3(grid).y, dim3(grid).z)"
    assert f"<<<{grid}, dim3(dim3(block).x, {rows}), (0), stream>>>(" in kept
    assert "for (unsigned int cutune_j = 0; cutune_j < ITEMS_T; ++cutune_j) {" in kept
    _nvcc_whole_file(kept, tmp_path)


def test_a_variant_whose_launch_the_host_cannot_spell_is_refused_not_written_with_the_wrong_launch() -> None:
    source = """
__global__ void k(float* o, long n) {
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)blockDim.x * gridDim.x) o[i] = 0;
}
void run(float* o, long n) { k<<<(n + 255) / 256, 256>>>(o, n); }
"""
    model = parse_source(source)
    variant = GridShape().apply(model, "k", None)
    assert variant.launch is not None
    site = model.launches_of("k")[0]
    with pytest.raises(HostLaunchError, match="reads sm_count, which the host code has no name for"):
        host_config(variant.launch, site, ["BLOCKS_PER_SM"], lambda name: name)
    with pytest.raises(HostLaunchError, match="reads sm_count"):
        keep_variant(model, "k", variant, {})
