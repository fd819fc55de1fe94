"""rows_on_grid: rows on the block's y axis numbered by a count of their own, moved onto the grid's y axis where the
block's rows never meet, refused naming what lets them meet; and row_reduce's variant of such a sample."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.limits import limits_for
from cutune.spec import load_spec
from cutune.template.recipes.base import KernelSource
from cutune.template.variants import with_variants
from cutune.template.variants.row_reduce import RowReduce
from cutune.template.variants.rows_on_grid import rows_on_grid, warps_within_rows

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
EMULATOR = Path(__file__).resolve().parents[2] / "data" / "template" / "variants" / "warp_emulator.h"

# a row of one warp on x, numbered by a count of rows per block that the launch need not give the block
KERNEL = """\
template <int kRows>
__global__ void k(float* out, const float* in, int rows, int cols) {{
  {shared}
  const int row = blockIdx.x * kRows + threadIdx.y;
  if (row >= rows) return;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += {term};
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  {extra}
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[row * cols + c] = in[row * cols + c] / s;
}}
{helper}
void launch(float* out, const float* in, int rows, int cols) {{
  dim3 block({x}, rows < 4 ? rows : 4);
  k<4><<<(rows + 3) / 4, block>>>(out, in, rows, cols);
}}
"""


def _moved(x: str = "32", shared: str = "", term: str = "in[row * cols + c]", extra: str = "", helper: str = "") -> str:
    text = KERNEL.format(x=x, shared=shared, term=term, extra=extra, helper=helper)
    model = parse_source(text, "k.cu")
    moved = rows_on_grid(KernelSource(model, model.kernel("k")), None, "row_reduce")
    assert moved is not None
    return moved


def test_the_block_y_axis_becomes_the_grid_y_axis() -> None:
    moved = _moved(shared="__shared__ float part[4][2];", extra="part[threadIdx.y][0] = s;")
    assert "const int row = blockIdx.x * kRows + blockIdx.y;" in moved
    assert "part[blockIdx.y][0] = s;" in moved  # the row's own slice, still its own
    assert "threadIdx.y" not in moved.split("void launch")[0]
    assert "dim3 block(32, rows < 4 ? rows : 4);" in moved  # the host code is left as it is


def test_the_builtins_may_be_spelled_through_locals() -> None:
    text = KERNEL.format(x="32", shared="", term="in[row * cols + c]", extra="", helper="").replace(
        "const int row = blockIdx.x * kRows + threadIdx.y;",
        "const int bx = blockIdx.x;\n  const int ty = threadIdx.y;\n  const int row = bx * kRows + ty;",
    )
    model = parse_source(text, "k.cu")
    moved = rows_on_grid(KernelSource(model, model.kernel("k")), None, "row_reduce")
    assert moved is not None and "const int ty = blockIdx.y;" in moved


def test_a_kernel_without_such_rows_is_not_read() -> None:
    model = parse_source(
        KERNEL.format(x="32", shared="", term="0.f", extra="", helper="").replace("kRows", "1"), "k.cu"
    )
    text = model.text.replace("blockIdx.x * 1 + threadIdx.y", "blockIdx.x")
    plain = parse_source(text, "k.cu")
    assert rows_on_grid(KernelSource(plain, plain.kernel("k")), None, "row_reduce") is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"shared": "__shared__ float total;", "extra": "total = s;"}, r"`total` \(line 3\) is shared by the block"),
        ({"shared": "__shared__ float part[8];", "extra": "part[threadIdx.x % 8] = s;"}, r"`part\[8\]` .* is shared"),
        ({"extra": "s += __syncthreads_count(s > 0.f);"}, r"the kernel reads the block as a whole"),
        ({"extra": "s += blockIdx.y;"}, r"reads another axis of the grid"),
        ({"term": "load(in, row * cols + c)"}, r"calls `load` \(line 7\), which the file does not define"),
        (
            {
                "term": "load(in, row * cols + c)",
                "helper": "__device__ float load(const float* p, int i) {\n  return p[i + threadIdx.y]; }",
            },
            r"`load` reads `threadIdx.y`",
        ),
        ({"x": "16"}, r"warps exchange values, and neither the spec nor the launches"),
    ],
)
def test_rows_that_may_meet_are_refused_with_the_reason(change: dict[str, str], reason: str) -> None:
    with pytest.raises(TransformRefused, match=reason):
        _moved(**change)


def test_row_reduce_runs_each_row_in_a_block_of_its_own_on_the_grid_y_axis() -> None:
    path = SAMPLES / "grouped_rms_norm.cu"
    model = parse_source(path.read_text(), str(path))
    kernel = "grouped_rms_norm_kernel"
    spec = load_spec(SAMPLES / "grouped_rms_norm.tune.toml").kernel(kernel)
    variant = RowReduce().apply(model, kernel, spec)
    assert "const int row = cutune_row * kMaxRowsPerBlock + blockIdx.y;" in variant.body
    assert "sum_sq = cutune_rr_allreduce<ROW_THREADS>(sum_sq, cutune_rr_sum{}" in variant.body
    _, combined = with_variants(model, kernel, [variant], spec)
    assert combined is not None
    names = {**limits_for("sm_90").as_names(), "cols": 200, "ROW_THREADS": 64, "ROW_VEC": 4}
    # a small batch: the original's one block of 3 rows (not the kernel's 8), the variant's 3 blocks on y
    assert combined.launch({**names, "rows": 3, "VARIANT": 0})[:2] == ((1, 1, 1), (32, 3, 1))
    assert combined.launch({**names, "rows": 3, "VARIANT": 1})[:2] == ((1, 3, 1), (64, 1, 1))
    assert combined.launch({**names, "rows": 13, "VARIANT": 1})[:2] == ((2, 8, 1), (64, 1, 1))


# rows on y numbered by the block's own y size (rows_on_y's form), each row's sum all-reduced by xor shuffles
ON_Y = """\
__global__ void k(float* out, const float* in, int rows, int cols) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= rows) return;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += in[row * cols + c];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[row * cols + c] = in[row * cols + c] / s;
}
constexpr int kWarpSize = 32;
void launch(float* out, const float* in, int rows, int cols) {
  const int threads = X;
  dim3 block(threads, 4);
  k<<<(rows + 3) / 4, block>>>(out, in, rows, cols);
}
"""


@pytest.mark.parametrize(
    ("x", "whole"),
    [
        ("16", False),
        ("32", True),
        ("cols > 512 ? 4 * kWarpSize : 2 * kWarpSize", True),  # a local's choice between multiples of the warp
        ("cols > 512 ? 64 : 16", False),
        ("cols / 8", False),
    ],
)
def test_a_warp_lies_within_a_row_where_every_launch_is_whole_warps_wide(x: str, whole: bool) -> None:
    model = parse_source(ON_Y.replace("X;", f"{x};"), "k.cu")
    assert warps_within_rows(KernelSource(model, model.kernel("k")), None) is whole


def test_a_warp_holding_several_rows_on_y_keeps_them_in_one_block() -> None:
    # a (16, 4) block puts two rows in a warp: its `xor 16` adds the other row's sum, which one row per block would not
    model = parse_source(ON_Y.replace("X;", "16;"), "k.cu")
    with pytest.raises(TransformRefused, match=r"a block whose x size is a multiple of 32: a warp may hold several"):
        RowReduce().apply(model, "k", None)
    RowReduce().apply(parse_source(ON_Y.replace("X;", "32;"), "k.cu"), "k", None)
    # the shuffles in a helper of the file
    helper = (
        "__device__ float row_sum(float s) {\n"
        "  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(~0u, s, o);\n"
        "  return s;\n}\n"
    )
    text = helper + ON_Y.replace("X;", "16;").replace(
        "for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);", "s = row_sum(s);"
    )
    model = parse_source(text, "k.cu")
    assert not warps_within_rows(KernelSource(model, model.kernel("k")), None)  # a warp a row


def test_shared_memory_of_the_file_is_shared_by_the_block_rows() -> None:
    text = "extern __shared__ float staged[];\n" + KERNEL.format(
        x="32", shared="", term="in[row * cols + c]", extra="staged[threadIdx.x] = s;", helper=""
    )
    model = parse_source(text, "k.cu")
    with pytest.raises(TransformRefused, match=r"`staged` \(line 1\), shared memory of the file"):
        rows_on_grid(KernelSource(model, model.kernel("k")), None, "row_reduce")
    # another function's shared array of the same name is its own
    other = "__global__ void other(float* p) { __shared__ float part[4]; part[0] = p[0]; p[1] = part[0]; }\n"
    sliced = KERNEL.format(
        x="32", shared="__shared__ float part[4][2];", term="0.f", extra="part[threadIdx.y][0] = s;", helper=""
    )
    model = parse_source(other + sliced, "k.cu")
    assert rows_on_grid(KernelSource(model, model.kernel("k")), None, "row_reduce") is not None


# the sample's norm at T = float on the host (warp_emulator.h): the original on (32, y) blocks and the kernel with its
# y axis moved onto the grid on (32, 1) blocks of a (blocks, y) grid, the outputs compared byte for byte: the
# launcher's small batch (3 rows on one block of 3, fewer than the kernel's count of 8), its 13 rows on two blocks of
# 8 (three rows past the end), and a launch of 4 rows per block on two blocks, which leaves rows 4-7 and 12 undone in
# the original (the kernel numbers 8 per block): the moved kernel must leave the same rows
HARNESS = """
#include <random>
int main() {
  for (auto [rows, rows_per_block] : {std::pair{3u, 3u}, {13u, 8u}, {13u, 4u}}) {
    const int cols = 200;
    std::mt19937 rng(rows * rows_per_block);
    std::uniform_real_distribution<float> uniform(-2.f, 2.f);
    std::vector<float> in(rows * cols), gamma(cols);
    for (auto& v : in) v = uniform(rng);
    for (auto& v : gamma) v = uniform(rng);
    const unsigned blocks = (rows + 7) / 8;
    std::vector<float> original(rows * cols, -1.f), moved(rows * cols, -1.f);
    launch(blocks, 1, 32, rows_per_block, [&] {
      grouped_rms_norm_kernel<float, 8>(original.data(), in.data(), gamma.data(), rows, cols, 1e-6f);
    });
    launch(blocks, rows_per_block, 32, 1, [&] {
      moved_kernel<float, 8>(moved.data(), in.data(), gamma.data(), rows, cols, 1e-6f);
    });
    std::printf("%u %u %s\\n", rows, rows_per_block, original == moved ? "equal" : "different");
  }
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
def test_the_moved_kernel_equals_the_original_bit_for_bit_on_emulated_warps(tmp_path: Path) -> None:
    path = SAMPLES / "grouped_rms_norm.cu"
    model = parse_source(path.read_text(), str(path))
    kernel = model.kernel("grouped_rms_norm_kernel")
    moved_text = rows_on_grid(KernelSource(model, kernel), None, "row_reduce")
    assert moved_text is not None
    moved = parse_source(moved_text, str(path)).kernel("grouped_rms_norm_kernel")
    data = model.text.encode()
    original_def = data[kernel.span.start_byte : kernel.span.end_byte].decode()
    moved_def = moved_text.encode()[moved.span.start_byte : moved.span.end_byte].decode()
    assert "blockIdx.y" in moved_def and "threadIdx.y" not in moved_def
    prelude = f'#include "{EMULATOR}"\n#define __restrict__ __restrict\nconstexpr int kWarpSize = 32;\n'
    moved_def = moved_def.replace("grouped_rms_norm_kernel(", "moved_kernel(")
    (tmp_path / "emulated.cpp").write_text(f"{prelude}{original_def}\n{moved_def}\n{HARNESS}")
    build = ["g++", "-std=c++20", "-O1", "-pthread", "-w", str(tmp_path / "emulated.cpp"), "-o", str(tmp_path / "run")]
    done = subprocess.run(build, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    ran = subprocess.run([str(tmp_path / "run")], capture_output=True, text=True, timeout=60, check=True)
    assert ran.stdout.split("\n")[:3] == ["3 3 equal", "13 8 equal", "13 4 equal"], ran.stdout
