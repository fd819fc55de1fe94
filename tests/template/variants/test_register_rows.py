"""register_rows: a row kept in local arrays by counted loops over the block's rounds, read as block-stride loops
over the row (real tree-sitter trees), and refused with its reason where a reading could change what it does."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.template.recipes.base import KernelSource
from cutune.template.variants.canonical import canonicalise
from cutune.template.variants.loops import constant_names
from cutune.template.variants.register_rows import register_rows
from cutune.template.variants.row_reduce import RowReduce

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "template" / "variants" / "register_rows.cu"
SAMPLE = ROOT / "samples" / "register_layer_norm.cu"
WARP = ROOT / "samples" / "warp_softmax.cu"


def _read(path: Path, kernel: str) -> str:
    model = parse_source(path.read_text(), str(path))
    read = register_rows(KernelSource(model, model.kernel(kernel)), "row_reduce")
    assert read is not None
    span = parse_source(read.text).kernel(kernel).body_span
    return read.text.encode()[span.start_byte : span.end_byte].decode()


def test_loops_over_rounds_and_their_tails_become_block_stride_loops_over_the_row() -> None:
    body = _read(SAMPLE, "layer_norm_fwd_kernel")
    assert body.count("for (int r = threadIdx.x; r < hidden; r += blockDim.x)") == 3
    assert "row_vals[r] = in[r];" in body and "out[r] = row_vals[r] * rstd * gamma[r] + beta[r];" in body
    # the count, the last element, the reset and the arrays' declarations are read away
    assert "rounds" not in body and "last" not in body and "float row_vals[" not in body


def test_a_loop_after_the_count_took_in_the_tail_runs_over_every_element_alone() -> None:
    body = _read(SAMPLE, "layer_norm_bwd_input_kernel")
    # the last loop has no tail of its own: `rounds++` closed the first one's
    assert "in_grad[r] = grad_vals[r] - sum;" in body and body.count("r < hidden") == 5


def test_a_loop_over_the_rounds_without_an_array_is_read_as_well() -> None:
    body = _read(DATA, "reread_kernel")
    assert "for (int r = threadIdx.x; r < n; r += blockDim.x) {\nsum += row[r];\n}" in body
    assert body.count("r < n") == 3 and "rounds" not in body


def test_a_loop_over_a_template_count_is_left_alone() -> None:
    model = parse_source(DATA.read_text(), str(DATA))
    assert register_rows(KernelSource(model, model.kernel("unrolled_kernel")), "row_reduce") is None


@pytest.mark.parametrize(
    ("kernel", "reason"),
    [
        ("no_tail_kernel", "leaves the thread's last, partial round undone"),
        ("odd_tail_kernel", "the tail does not do to the last element what the loop does to the others"),
        ("round_number_kernel", "reads the round `r` otherwise than in `r * blockDim.x + threadIdx.x`"),
        ("unset_kernel", "reads the register array `vals` before a loop sets it"),
        ("shrinking_row_kernel", "changes `n`, which `rounds` is counted from"),
    ],
)
def test_refuses_with_its_reason(kernel: str, reason: str) -> None:
    model = parse_source(DATA.read_text(), str(DATA))
    with pytest.raises(TransformRefused, match="row_reduce") as refused:
        RowReduce().apply(model, kernel, None)
    assert reason in refused.value.reason


def _warp(edit: tuple[str, str] = ("", "")) -> str:
    return WARP.read_text().replace(*edit) if edit[0] else WARP.read_text()


def test_a_fixed_count_of_checked_rounds_is_read_as_stride_loops_from_the_rows_start() -> None:
    model = parse_source(_warp(), str(WARP))
    read = register_rows(KernelSource(model, model.kernel("warp_softmax_kernel")), "row_reduce")
    assert read is not None and read.arrays == {"vals": ("float", "kIters")}
    span = parse_source(read.text).kernel("warp_softmax_kernel").body_span
    body = "".join(read.text.encode()[span.start_byte : span.end_byte].decode().split())
    header = "for(intit=threadIdx.x;it<min(cols,(kIters)*(kWarp));it+=blockDim.x){"
    assert body.count(header) == 3
    # the pointers start at the row, the element at the round's index
    assert "constintfirst=row*cols;" in body and "vals[it]=static_cast<float>(src[it]);" in body
    assert "dst[it]=static_cast<T>(vals[it]*inv);" in body and "floatvals[" not in body


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (("const dim3 block(kWarp,", "const dim3 block(64,"), "steps by kWarp, but the launch at line 64 runs `64`"),
        (("  float vals[kIters];", "  float vals[kIters];\n  dst[0] = src[0];"), "reads `dst`, moved to the thread's"),
        (
            ("if (col < cols) dst[", "dst[0] = 0;\n    if (col < cols) dst["),
            "has no bounds check `if (idx < n)` as all",
        ),
        (("total += vals[it];", "total += vals[it] + it;"), "reads the round `it` otherwise"),
        (("dst[it * kWarp] = ", "dst[it] = "), "reads `dst` otherwise than at the round's element"),
    ],
)
def test_checked_rounds_refuse_with_their_reason(edit: tuple[str, str], reason: str) -> None:
    model = parse_source(_warp(edit), str(WARP))
    with pytest.raises(TransformRefused) as refused:
        register_rows(KernelSource(model, model.kernel("warp_softmax_kernel")), "row_reduce")
    assert reason in refused.value.reason


def test_rounds_of_a_constant_stride_hold_the_row_at_any_thread_count_in_one_pass() -> None:
    # the rounds sample: ROUNDS rounds of THREADS (a macro): a thread of ROW_THREADS holds ceil(ROUNDS * THREADS /
    # ROW_THREADS) of the row, and the row is at most ROUNDS * THREADS long: every pack loaded before any is used
    path = ROOT / "samples" / "rounds_rms_norm.cu"
    model = canonicalise(parse_source(path.read_text(), str(path)), "rounds_rms_norm_kernel").model
    read = register_rows(KernelSource(model, model.kernel("rounds_rms_norm_kernel")), "row_reduce")
    assert read is not None and read.arrays == {
        "held": ("float", "((ROUNDS) * (THREADS) + ROW_THREADS - 1) / ROW_THREADS")
    }
    variant = RowReduce().apply(model, "rounds_rms_norm_kernel", None)
    threads = next(p for p in variant.params if p.name == "ROW_THREADS")
    assert threads.values == (32, 64, 128, 256, 512, 1024) and threads.default == 256
    assert "constexpr int cutune_len_max = ((ROUNDS) * (THREADS));" in variant.body
    assert "constexpr bool cutune_exact = cutune_one_pass && cutune_len_ct > 0" in variant.body  # the cap: checked
    # a stride known only at run time keeps the original's thread count
    runtime = canonicalise(
        parse_source(path.read_text().replace("r * THREADS;", "r * blockDim.x;"), str(path)), "rounds_rms_norm_kernel"
    ).model
    variant = RowReduce().apply(runtime, "rounds_rms_norm_kernel", None)
    assert next(p for p in variant.params if p.name == "ROW_THREADS").values == (1024,)
    assert "constexpr int cutune_len_max = 0;" in variant.body


def test_constant_names_are_value_parameters_and_macros_of_integer_arithmetic_over_them() -> None:
    text = """
#define WARP 32
#define WARPS (1024 / WARP)
#define MASK 0x1fu
#define LANES(n) ((n) * WARP)
#define GRID (gridDim.x * WARP)
#define SIZE sizeof(float)
#define LATER (WARPS * UNDEFINED)
template <typename T, int ROUNDS>
__global__ void k(T* x) { x[threadIdx.x] = 0; }
"""
    model = parse_source(text)
    names = constant_names(KernelSource(model, model.kernel("k")))
    assert names == {"ROUNDS", "WARP", "WARPS", "MASK"}  # no type, function-like, member, call or unknown name
