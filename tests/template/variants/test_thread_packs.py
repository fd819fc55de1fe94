"""thread_packs: a thread's short loops over consecutive elements read and written as whole packs, chained under
block_items; the rewrite's text, its refusals (an in-place read among them), nvcc and NVRTC builds of the packed paths,
and on the GPU every configuration equal to the original while a planted swap of two packs is rejected."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.project import open_kernel
from cutune.template.variants import TRANSFORMS, ThreadPacks, combine_all
from cutune.template.variants.block_items import ITEMS, ITEMS_T
from cutune.template.variants.thread_packs import PACKS
from tests.cuda.test_extract import needs_nvrtc

from .compile import assert_compiles, measured_failures, variant_alone

FILE = Path(__file__).resolve().parents[2] / "data/template/variants/thread_packs.cu"
KERNELS = ["dequant_nibbles_kernel", "quad_scale_kernel", "dequant_pairs_kernel"]
LOOP = """
__global__ void k(float* __restrict__ y, const float* __restrict__ x, float* z, int n) {{
  float* yr = y + blockIdx.x * 64 + 4 * threadIdx.x;
  const float* xr = x + blockIdx.x * 64 + 4 * threadIdx.x;
  {body}
}}
"""


def _refusal(body: str) -> str:
    with pytest.raises(TransformRefused) as caught:
        ThreadPacks().apply(parse_source(LOOP.format(body=body)), "k", None)
    return caught.value.reason


def test_registered_late_so_the_other_transforms_keep_their_numbers() -> None:
    assert list(TRANSFORMS)[-2:] == ["thread_packs", "row_cache"]  # row_cache came after it
    assert isinstance(TRANSFORMS["thread_packs"], ThreadPacks)


def test_the_loop_reads_and_writes_whole_packs_and_the_original_stays_at_the_default() -> None:
    ctx = open_kernel(FILE, "dequant_nibbles_kernel")
    variant = ThreadPacks().apply(ctx.template_model, "dequant_nibbles_kernel", ctx.require_spec())
    flat = " ".join(variant.body.split())
    # both bytes in one load before the loop, each run of 2 weights kept in registers and stored as one pack
    assert "cutune_tp_load<2>(cutune_tp0_l0, q + (0));" in flat
    assert "cutune_tp0_s0[l] = static_cast<T>(s * (cutune_tp0_l0[l] & 0xF) + m);" in flat
    assert "cutune_tp_store<2>(y + (0), cutune_tp0_s0); cutune_tp_store<2>(y + (32), cutune_tp0_s1);" in flat
    assert f"if constexpr ({PACKS}) {{" in flat and "} else { for (int l = 0; l < n; ++l) { y[l + 0] =" in flat
    assert [(p.name, p.values, p.default) for p in variant.params] == [(PACKS, (0, 1), 0)]


def test_a_loop_from_a_start_packs_from_that_start() -> None:
    ctx = open_kernel(FILE, "quad_scale_kernel")
    flat = " ".join(ThreadPacks().apply(ctx.template_model, "quad_scale_kernel", ctx.require_spec()).body.split())
    assert "cutune_tp_load<4>(cutune_tp0_l0, xr + (l0) + (0));" in flat
    assert "cutune_tp0_s0[l - (l0)] = cutune_tp0_l0[l - (l0)] * s;" in flat
    assert "cutune_tp_store<4>(yr + (l0) + (0), cutune_tp0_s0);" in flat
    # the pragma stays on a loop: the packed one, and the original's
    assert flat.count("#pragma unroll") == 2


def test_stores_unrolled_by_hand_are_packed_as_the_loop_they_unroll() -> None:
    ctx = open_kernel(FILE, "dequant_pairs_kernel")
    flat = " ".join(ThreadPacks().apply(ctx.template_model, "dequant_pairs_kernel", ctx.require_spec()).body.split())
    # each pair (the shift between them ends a run) read as a 2-element loop, then packed; the original path its loop
    assert (
        "cutune_tp_store<2>(y + (0), cutune_tp0_s0);" in flat and "cutune_tp_store<2>(y + (32), cutune_tp1_s0);" in flat
    )
    assert flat.count("cutune_tp_load<2>(") == 2 and "shift += 4; if constexpr (THREAD_PACKS) {" in flat
    assert "for (int cutune_rr1 = 0; cutune_rr1 < 2; ++cutune_rr1) { y[cutune_rr1 + 32] = " in flat


def test_block_items_chains_onto_it() -> None:
    ctx = open_kernel(FILE, "dequant_nibbles_kernel")
    combined = combine_all(ctx.template_model, "dequant_nibbles_kernel", ctx.template, ctx.spec)
    assert [v.name for v in combined.variants] == ["thread_packs_block_items", "thread_packs"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("for (int l = 0; l < 4; ++l) { z[l] = xr[l]; }", "writes through z, which no `__restrict__` parameter"),
        ("for (int l = 0; l < 4; ++l) { yr[l] = yr[l + 4] + xr[l]; }", "reads yr, which it writes"),
        # in place: another pointer into the same restrict array (its loads would all come before its stores)
        (
            "const float* ys = y + 1; for (int l = 0; l < 4; ++l) { yr[l] = ys[l]; }",
            "reads through ys, which may reach the memory it writes (y)",
        ),
        ("for (int l = 0; l < 4; ++l) { yr[l] = xr[l]; yr[l + 2] = 0.f; }", "at elements 4 or fewer apart"),
        ("for (int l = 0; l < 4; ++l) { yr[l] = __ldg(xr + l); }", "calls __ldg (line 5)"),
        ("for (int l = xr[0]; l < xr[0] + 4; ++l) { yr[l] = 0.f; }", "starts at `xr[0]`, which calls or reads memory"),
        ("for (int l = 0; l < 4; ++l) { yr[l] = xr[l]; l += 0; }", "not this shape"),  # an assignment of l
        ("for (int l = 0; l < n; ++l) { yr[l] = xr[l]; }", "no short loop of a thread"),  # a count not known
        ("for (int l = 0; l < 3; ++l) { yr[l] = xr[l]; }", "no short loop of a thread"),  # not a power of two
    ],
)
def test_loops_whose_reads_and_writes_cannot_move_are_refused(body: str, reason: str) -> None:
    assert reason in _refusal(body) or (reason == "not this shape" and "no short loop" in _refusal(body))


@pytest.mark.nvcc
@needs_nvrtc
@pytest.mark.parametrize("kernel", KERNELS)
def test_the_packed_paths_compile_with_nvcc_and_nvrtc(kernel: str, tmp_path: Path) -> None:
    ctx = open_kernel(FILE, kernel)
    combined = combine_all(ctx.template_model, kernel, ctx.template, ctx.spec)
    assert combined.spec is not None
    default = combined.template.space.default()
    configs = [
        {**default, "VARIANT": 1, PACKS: 1, "ITEMS_Y": 4},
        {**default, "VARIANT": 2, PACKS: 1},
        {**default, "VARIANT": 2, PACKS: 0},
    ]
    specs = [combined.spec]
    if kernel != "quad_scale_kernel":  # 4-byte floats: one 8-byte pack a run, where fp16 makes one of 4 bytes
        specs.append(dataclasses.replace(combined.spec, template_args={"T": "float"}))
    assert_compiles(combined.template, specs, configs, tmp_path, FILE)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_every_configuration_equals_the_original_on_the_gpu(kernel: str) -> None:
    ctx = open_kernel(FILE, kernel)
    spec = ctx.require_spec()
    combined = combine_all(ctx.template_model, kernel, ctx.template, spec)
    for variant in combined.variants:
        # chained, every rows a block × items a row (those a row too, where the body lets it run several)
        vary = {"VARIANT", PACKS} | ({ITEMS, ITEMS_T} if "block_items" in variant.name else set())
        passed, failed = measured_failures(variant_alone(ctx, kernel, variant), spec, vary)
        assert passed >= 2 and not failed, (variant.name, failed)


@pytest.mark.gpu
def test_two_packs_swapped_are_caught_on_the_gpu() -> None:
    # planted wrong: the high nibbles' pack stored where the low nibbles' goes, and back
    ctx = open_kernel(FILE, "dequant_nibbles_kernel")
    spec = ctx.require_spec()
    variant = ThreadPacks().apply(ctx.template_model, "dequant_nibbles_kernel", spec)
    body = variant.body.replace("y + (0), cutune_tp0_s0", "y + (0), cutune_tp0_sX").replace(
        "y + (32), cutune_tp0_s1", "y + (32), cutune_tp0_s0"
    )
    wrong = dataclasses.replace(variant, body=body.replace("cutune_tp0_sX", "cutune_tp0_s1"))
    assert wrong.body != variant.body
    passed, failed = measured_failures(variant_alone(ctx, "dequant_nibbles_kernel", wrong), spec, {"VARIANT", PACKS})
    assert failed and all(f"'{PACKS}': 0" not in f for f in failed), (passed, failed)


def test_a_read_under_a_condition_stays_element_by_element() -> None:
    # a pack would read xr[n..3], which the loop does not; an array read any other way is not packed at all
    source = LOOP.format(body="for (int l = 0; l < 4; ++l) { yr[l] = l < n ? xr[l] : 0.f; yr[l + 4] = xr[l + 4]; }")
    flat = " ".join(ThreadPacks().apply(parse_source(source), "k", None).body.split())
    assert "cutune_tp0_s0[l] = l < n ? xr[l] : 0.f;" in flat and "cutune_tp0_s1[l] = xr[l + 4];" in flat
    assert "cutune_tp_load" not in flat and "cutune_tp_store<4>(yr + (4), cutune_tp0_s1);" in flat
