"""The per-size dispatch: its rule, the held-out sizes that check it, and the code it writes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cutune.apply.config import apply_dispatch
from cutune.apply.dispatch import MARKER
from cutune.errors import SourceError
from cutune.project import open_kernel
from cutune.template.edits import apply_edits
from cutune.template.model import Config
from cutune.tune.dispatch import (
    Branch,
    DispatchPlan,
    held_out_sizes,
    plan_dispatch,
    unchecked_ranges,
)

ROOT = Path(__file__).parents[2]
SAMPLE = ROOT / "samples" / "kv_cache_write.cu"
STUB = ROOT / "tests" / "data" / "template" / "torch_stub"
SIZES = [{"t": 16, "h": 8}, {"t": 64, "h": 8}, {"t": 256, "h": 8}, {"t": 2048, "h": 8}]
ORIG, A, B = Config.of({"X": 0}), Config.of({"X": 1}), Config.of({"X": 2})


def test_a_size_takes_the_configuration_of_the_nearest_tuned_size_below() -> None:
    plan = plan_dispatch(SIZES, [A, A, ORIG, B], ORIG)
    assert plan.variable == "t"  # the first variable that differs between sizes
    assert plan.branches == (Branch(None, A), Branch(256, ORIG), Branch(2048, B))  # equal neighbours merge
    got = {t: plan.config_for({"t": t, "h": 8}) for t in (1, 16, 100, 255, 256, 2047, 2048, 10**6)}
    assert got == {1: A, 16: A, 100: A, 255: A, 256: ORIG, 2047: ORIG, 2048: B, 10**6: B}


def test_a_held_out_loss_hands_the_range_back_to_the_original() -> None:
    plan = plan_dispatch(SIZES, [A, A, ORIG, B], ORIG, slower_from={1: 128})
    assert plan.branches == (Branch(None, A), Branch(128, ORIG), Branch(2048, B))
    assert plan.config_for({"t": 127}) == A and plan.config_for({"t": 128}) == ORIG
    assert DispatchPlan.from_dict(plan.to_dict()) == plan


def test_held_out_sizes_lie_between_tuned_ones_and_keep_their_divisibility() -> None:
    held = held_out_sizes(SIZES, {})
    assert held == [(0, {"t": 32, "h": 8}), (1, {"t": 128, "h": 8}), (2, {"t": 512, "h": 8})]
    # no shared multiple strictly between: the spec's declared one is used
    assert held_out_sizes([{"t": 16}, {"t": 32}], {"t": 4}) == [(0, {"t": 20})]
    # the other variables differ between neighbours: the lower one's, whose configuration the rule launches
    assert held_out_sizes([{"t": 16, "h": 8}, {"t": 64, "h": 16}], {}) == [(0, {"t": 32, "h": 8})]


def test_every_tuned_size_launches_its_own_pick_when_sizes_share_the_first_variable() -> None:
    """The review's reproduction: two tuned sizes share n; the second's pick used to take over the first."""
    sizes = [{"n": 16, "d": 4096}, {"n": 16, "d": 14336}, {"n": 256, "d": 4096}]
    plan = plan_dispatch(sizes, [A, B, ORIG], ORIG)
    assert [plan.config_for(s) for s in sizes] == [A, B, ORIG]
    assert (plan.variable, plan.inner_variable) == ("n", "d")
    assert plan.branches == (Branch(None, ORIG, (Branch(None, A), Branch(14336, B))), Branch(256, ORIG))
    # between and beyond tuned values: the nearest tuned value below on each variable
    assert plan.config_for({"n": 255, "d": 8192}) == A and plan.config_for({"n": 1, "d": 10**6}) == B
    assert plan.config_for({"n": 10**6, "d": 14336}) == ORIG
    assert plan.ranges() == [("n < 256, d < 14336", A), ("n < 256, 14336 ≤ d", B), ("256 ≤ n", ORIG)]
    assert plan.configs == (A, B, ORIG)
    assert DispatchPlan.from_dict(plan.to_dict()) == plan
    # a single variable that tells every size apart is keyed on alone
    assert plan_dispatch([{"n": 16, "d": 1}, {"n": 16, "d": 2}], [A, B], ORIG).variable == "d"


def test_sizes_the_key_cannot_tell_apart_share_the_original_unless_one_configuration_won_at_all() -> None:
    # three variables move; no pair tells the four sizes apart (x, y) decides and z is left out
    sizes = [{"x": 1, "y": 1, "z": 1}, {"x": 1, "y": 1, "z": 2}, {"x": 2, "y": 1, "z": 1}, {"x": 2, "y": 1, "z": 2}]
    sizes = [*sizes, {"x": 1, "y": 2, "z": 1}, {"x": 2, "y": 2, "z": 2}]
    plan = plan_dispatch(sizes, [A, A, A, B, B, B], ORIG)
    assert (plan.variable, plan.inner_variable) == ("x", "y")
    assert [plan.config_for(s) for s in sizes] == [A, A, ORIG, ORIG, B, B]
    # what each size launches is its own pick or the original: never a configuration measured elsewhere
    assert all(plan.config_for(s) in (c, ORIG) for s, c in zip(sizes, [A, A, A, B, B, B], strict=True))


def test_a_held_out_loss_inside_a_split_range_hands_back_only_that_part() -> None:
    sizes = [{"t": 16, "h": 32}, {"t": 16, "h": 64}, {"t": 256, "h": 32}, {"t": 256, "h": 64}]
    held = held_out_sizes(sizes, {})
    assert held == [(0, {"t": 64, "h": 32}), (1, {"t": 64, "h": 64})]  # each part of the split is checked
    plan = plan_dispatch(sizes, [A, B, ORIG, ORIG], ORIG, slower_from={1: 64})
    assert plan.branches == (
        Branch(None, ORIG, (Branch(None, A), Branch(64, B))),
        Branch(64, ORIG, (Branch(None, A), Branch(64, ORIG))),  # from the held-out value: h ≥ 64 is handed back
        Branch(256, ORIG),
    )
    assert [plan.config_for(s) for s in sizes] == [A, B, ORIG, ORIG]
    assert plan.config_for({"t": 63, "h": 64}) == B and plan.config_for({"t": 64, "h": 64}) == ORIG
    assert plan.config_for({"t": 64, "h": 32}) == A
    assert unchecked_ranges(plan, sizes, {}) == ("32 < h < 64 where t < 64", "32 < h < 64 where 64 ≤ t < 256")


def test_rotary_like_sizes_alternating_another_variable_are_checked_between_every_neighbour() -> None:
    heads = [32, 64, 32, 64]
    sizes = [{"t": t, "h": h} for t, h in zip([1, 16, 77, 1000], heads, strict=True)]
    held = held_out_sizes(sizes, {})
    assert held == [(0, {"t": 4, "h": 32}), (1, {"t": 35, "h": 64}), (2, {"t": 277, "h": 32})]
    plan = plan_dispatch(sizes, [A, A, B, B], ORIG)
    assert plan.inner_variable is None and unchecked_ranges(plan, sizes, {}) == ()
    # no multiple of 8 fits between 16 and 20 (nor one both share): that range is named as unchecked
    assert unchecked_ranges(plan_dispatch([{"t": 16}, {"t": 20}], [A, B], ORIG), [{"t": 16}, {"t": 20}], {"t": 8}) == (
        "16 < t < 20",
    )


def _kv_dispatch() -> tuple[str, str]:
    ctx = open_kernel(SAMPLE, "kv_cache_write_kernel")
    assert ctx.spec is not None
    space = ctx.space
    original = space.default()
    decode = Config.of({**original, "BLOCK_THREADS": 1024, "SPECIALIZE_BLOCK_SIZE": True})
    prefill = Config.of({**original, "BLOCK_THREADS": 128})
    plan = plan_dispatch(ctx.spec.sizes, [decode, decode, original, prefill, prefill, prefill], original)
    applied = apply_dispatch(
        ctx.template_model, ctx.kernel.name, plan, space, ctx.spec.sizes, note="tuned on NVIDIA H200, 2026-11-22"
    )
    assert applied.flags == ()
    return ctx.template.source, apply_edits(ctx.template.source, applied.edits)


def test_the_dispatch_reads_like_code_a_person_would_write() -> None:
    before, after = _kv_dispatch()
    host = after[after.index("void kv_cache_write(") :]
    assert f"{MARKER} kv_cache_write_kernel, tuned on NVIDIA H200, 2026-11-22." in host
    assert "  if (num_tokens < 256) {  // BLOCK_THREADS=1024, SPECIALIZE_BLOCK_SIZE=true" in host
    assert "  } else if (num_tokens < 2048) {  // the original configuration" in host
    assert "  } else {  // BLOCK_THREADS=128" in host
    # compiled-in sizes are guarded by the host's value, the launch parameters are written as values
    assert "    if (block_size == 16) {" in host
    assert "      dim3 block(std::min(num_heads * head_size, 1024));" in host
    assert "serving::kv_cache_write_kernel<__nv_bfloat16, 0, 0, 16><<<grid, block, 0, stream>>>(" in host
    assert "    dim3 block(std::min(num_heads * head_size, 128));" in host
    # the original branch is the original statements, one level deeper
    original = before[before.index("  dim3 block(") : before.index("block_size);\n}") + len("block_size);")]
    assert "\n".join("  " + line for line in original.split("\n")) in after
    assert after.count("kv_cache_write_kernel<") == 4  # decode (guarded, and its fallback), original, prefill
    assert before[: before.index("void kv_cache_write(")] == after[: after.index("void kv_cache_write(")]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_dispatch_compiles_with_nvcc_against_a_torch_stub(tmp_path: Path) -> None:
    """torch is not installed here: tests/data/template/torch_stub declares the Tensor calls the host uses."""
    _, after = _kv_dispatch()
    _assert_compiles(after, tmp_path)


def _assert_compiles(text: str, tmp_path: Path) -> None:
    """`text` compiles with nvcc for sm_90 against the torch stub."""
    source = tmp_path / "kv_cache_write.cu"
    source.write_text(text)
    done = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", "-I", str(STUB), "-c", str(source), "-o", str(tmp_path / "k.o")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def _kv_two_variable_dispatch() -> str:
    """Two decode sizes share num_tokens and differ in num_heads: a split on num_heads inside the first range."""
    ctx = open_kernel(SAMPLE, "kv_cache_write_kernel")
    original = ctx.space.default()
    few_heads = Config.of({**original, "BLOCK_THREADS": 1024, "SPECIALIZE_BLOCK_SIZE": True})
    many_heads = Config.of({**original, "BLOCK_THREADS": 128})
    sizes = [
        {"num_tokens": t, "num_heads": h, "head_size": 128, "block_size": 16} for t, h in ((16, 8), (16, 32), (2048, 8))
    ]
    plan = plan_dispatch(sizes, [few_heads, many_heads, original], original)
    applied = apply_dispatch(ctx.template_model, ctx.kernel.name, plan, ctx.space, sizes, note="x")
    return apply_edits(ctx.template.source, applied.edits)


def test_a_dispatch_on_two_variables_nests_one_chain_in_the_other() -> None:
    after = _kv_two_variable_dispatch()
    host = after[after.index("void kv_cache_write(") :]
    assert (
        "  // A size between tuned ones takes the configuration of the nearest tuned num_tokens and num_heads" in host
    )
    assert "  if (num_tokens < 2048) {  // by num_heads\n    if (num_heads < 32) {  // BLOCK_THREADS=1024" in host
    assert "      if (block_size == 16) {" in host  # the compiled-in size, guarded inside the split
    assert "    } else {  // BLOCK_THREADS=128\n" in host
    assert "  } else {  // the original configuration\n" in host
    assert after.count("kv_cache_write_kernel<") == 4  # few heads (guarded, and its fallback), many heads, original


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_two_variable_dispatch_compiles_with_nvcc(tmp_path: Path) -> None:
    _assert_compiles(_kv_two_variable_dispatch(), tmp_path)


def test_applying_twice_and_unknown_size_names_are_refused() -> None:
    ctx = open_kernel(SAMPLE, "kv_cache_write_kernel")
    assert ctx.spec is not None
    _, after = _kv_dispatch()
    again = open_kernel(SAMPLE, "kv_cache_write_kernel", text=after)
    original = ctx.space.default()
    other = Config.of({**original, "BLOCK_THREADS": 128})
    plan = DispatchPlan("num_tokens", (Branch(None, other), Branch(256, original)))
    with pytest.raises(SourceError, match="holds a per-size dispatch already"):
        apply_dispatch(again.template_model, "kv_cache_write_kernel", plan, ctx.space, ctx.spec.sizes, note="x")
    unnamed = DispatchPlan("batch", (Branch(None, other), Branch(256, original)))
    with pytest.raises(SourceError, match="keys on batch, which the host code"):
        apply_dispatch(ctx.template_model, "kv_cache_write_kernel", unnamed, ctx.space, ctx.spec.sizes, note="x")


def test_one_configuration_for_every_size_is_written_as_the_defaults() -> None:
    ctx = open_kernel(SAMPLE, "kv_cache_write_kernel")
    assert ctx.spec is not None
    tuned = Config.of({**ctx.space.default(), "BLOCK_THREADS": 256})
    plan = DispatchPlan("num_tokens", (Branch(None, tuned),))
    applied = apply_dispatch(ctx.template_model, ctx.kernel.name, plan, ctx.space, ctx.spec.sizes, note="x")
    text = apply_edits(ctx.template.source, applied.edits)
    assert "static constexpr int BLOCK_THREADS = 256;" in text and MARKER not in text
