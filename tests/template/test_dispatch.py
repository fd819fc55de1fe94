"""The per-size dispatch: its rule, the held-out sizes that check it, and the code it writes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cutune.errors import SourceError
from cutune.project import open_kernel
from cutune.template.apply import apply_dispatch
from cutune.template.dispatch import MARKER, Branch, DispatchPlan, held_out_sizes, plan_dispatch
from cutune.template.edits import apply_edits
from cutune.template.model import Config

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
    assert held_out_sizes([{"t": 16, "h": 8}, {"t": 64, "h": 16}], {}) == []  # two variables move: no rule there


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
    source = tmp_path / "kv_cache_write.cu"
    source.write_text(after)
    done = subprocess.run(
        ["nvcc", "-std=c++17", "-arch=sm_90", "-I", str(STUB), "-c", str(source), "-o", str(tmp_path / "k.o")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


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
