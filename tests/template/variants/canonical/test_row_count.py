"""row_count: rows numbered by a compile-time count of rows (or warps) per block read as numbered by the block's
shape where every launch in the file runs blocks of that shape, and refused where a launch runs another."""

from __future__ import annotations

from pathlib import Path

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.template.variants.canonical.row_count import block_shape_rows

SAMPLE = Path(__file__).resolve().parents[4] / "samples" / "rows_per_block_rms_norm.cu"

ROWS_ON_Y = """
template <int kRows>
__global__ void k(float* out, const float* in, int rows, int n) {
  const int row = kRows * blockIdx.x + threadIdx.y;
  if (row >= rows) return;
  for (int c = threadIdx.x; c < n; c += blockDim.x) out[row * n + c] = in[row * n + c] * 3.0f;
}

void launch(float* out, const float* in, int rows, int n, cudaStream_t stream) {
  k<4><<<(rows + 3) / 4, dim3(32, 4), 0, stream>>>(out, in, rows, n);
}
"""


def test_rows_per_block_every_launch_matches_are_read_as_the_blocks_shape() -> None:
    result = block_shape_rows(parse_source(ROWS_ON_Y), "k")
    assert isinstance(result, SourceModel), result
    assert "const int row = blockDim.y * blockIdx.x + threadIdx.y;" in result.text
    warps = block_shape_rows(parse_source(SAMPLE.read_text(), str(SAMPLE)), "warp_rows_add_rms_norm_kernel")
    assert isinstance(warps, SourceModel), warps  # launched with 4 * serving::kWarpSize threads for 4 warps
    assert "const int row = blockIdx.x * (blockDim.x / 32) + warp_id;" in warps.text


def test_a_launch_of_another_shape_is_refused_with_the_reason() -> None:
    source = ROWS_ON_Y.replace("dim3(32, 4)", "dim3(32, 8)")
    assert block_shape_rows(parse_source(source), "k") == (
        "numbers its rows by kRows per block, but the launch at line 10 runs a block of (32, 8) where kRows is `4`"
    )
    text = SAMPLE.read_text().replace("<<<blocks, 4 * serving::kWarpSize", "<<<blocks, 8 * serving::kWarpSize")
    result = block_shape_rows(parse_source(text, str(SAMPLE)), "warp_rows_add_rms_norm_kernel")
    assert isinstance(result, str) and "runs a block of (8*32) where kWarpsPerBlock is `4`" in result
    assert block_shape_rows(parse_source(ROWS_ON_Y.split("void launch")[0]), "k") == (
        "numbers its rows by kRows per block, and no launch of k in this file says how many a block holds"
    )
