"""On a real GPU: every variant of the new samples, at several configurations, equals the original at every
size of its spec (the backend checks each against the original kernel; skipped without a CUDA GPU)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cutune.gpu.backend import TimingOptions
from cutune.gpu.registry import create_backend
from cutune.project import build_job, open_kernel
from cutune.template.model import Config
from cutune.template.variants import combine_all

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
CONFIGS = {
    "vectorized": [{"VEC_BYTES": 16}, {"VEC_BYTES": 8, "PACKS": 4, "BLOCK_DIV": 8}],
    "packs_per_thread": [{"ITEMS": 4}, {"ITEMS": 8, "ITEMS_BLOCK_DIV": 4}],
    "persistent_grid": [{"BLOCKS_PER_SM": 1}],
    "split": [{"SPLIT": 4}],
    "split_vectorized": [{"SPLIT": 8, "PACKS": 2}, {"SPLIT": 1, "VEC_BYTES": 8, "BLOCK_DIV": 4}],
    "split_packs_per_thread": [{"SPLIT": 16, "ITEMS": 4, "ITEMS_BLOCK_DIV": 2}],
    # the block reductions: each item its own shared partials; elsewhere, 4 items a row too
    "block_items": [{"ITEMS_Y": 2}, {"ITEMS_Y": 4}, {"ITEMS_Y": 2, "ITEMS_T": 4}],
}


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("file", "kernel"),
    [
        ("gated_activation.cu", "act_and_mul_kernel"),
        ("rotary_embedding.cu", "rotary_embedding_kernel"),
        ("rotary_styles.cu", "rotary_styles_kernel"),  # vectorized arm by arm on `if (NEOX)` in its helper
        # packs_per_thread on the loops over packs pack_rounds reads, on a 1-D block and a warp per head
        ("rounds_softmax.cu", "rounds_softmax_kernel"),
        ("head_rms_norm.cu", "head_rms_norm_kernel"),
        ("offset_rms_norm.cu", "offset_rms_norm_kernel"),  # on the loop over packs from a thread offset
        ("offset_rms_norm.cu", "offset_add_rms_norm_kernel"),
    ],
)
def test_every_variant_equals_the_original_on_the_gpu(file: str, kernel: str) -> None:
    ctx = open_kernel(SAMPLES / file, kernel)
    combined = combine_all(ctx.template_model, kernel, ctx.template, ctx.spec)
    assert combined.variants
    ctx = dataclasses.replace(ctx, template=combined.template, template_model=combined.model, spec=combined.spec)
    backend = create_backend("cupy")
    backend.open(build_job(ctx, timing=TimingOptions(warmup=1, reps=3, min_time_ms=0.0)))
    default = ctx.space.default()
    try:
        for k, variant in enumerate(combined.variants, 1):
            for values in CONFIGS.get(variant.name, []):  # the row reductions have their own GPU tests
                config = Config.of({**default, "VARIANT": k, **{n: v for n, v in values.items() if n in default}})
                measured = backend.evaluate(config)
                assert measured.ok, f"{variant.name} {config}: {measured.failure} {measured.detail}"
    finally:
        backend.close()
