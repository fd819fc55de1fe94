"""On the GPU: llama.cpp kernels (read in place from the corpus, with benchmarks/corpus_specs/) with 32-bit indices,
alone and under each structural variant at its defaults, equal the original at every size of their spec."""

from __future__ import annotations

import dataclasses

import pytest
from benchmarks.corpus_variants import TABLE, opened

from cutune.gpu.backend import TimingOptions
from cutune.gpu.registry import create_backend
from cutune.project import build_job
from cutune.template.model import Config
from cutune.template.recipes.index_bits import NAME, narrowed
from cutune.template.variants import VARIANT, combine_all
from tests.corpus.sources import corpora


@pytest.mark.gpu
@pytest.mark.skipif("llama.cpp" not in corpora(), reason="the llama.cpp corpus is not here (scripts/corpus.sh)")
@pytest.mark.parametrize("kernel", ["k_set_rows", "quantize_q8_1", "k_get_rows_float", "unary_gated_op_kernel"])
def test_32_bit_indices_equal_the_original_on_the_gpu(kernel: str) -> None:
    ctx = opened(next(e for e in TABLE if e.kernel == kernel))
    combined = combine_all(ctx.template_model, kernel, ctx.template, ctx.spec)
    assert any(p.name == NAME for p in combined.template.space.params)
    ctx = dataclasses.replace(ctx, template=combined.template, template_model=combined.model, spec=combined.spec)
    backend = create_backend("cupy")
    backend.open(build_job(ctx, timing=TimingOptions(warmup=1, reps=3, min_time_ms=0.0)))
    default = ctx.space.default()
    try:
        for k in range(len(combined.variants) + 1):
            config = narrowed(Config.of({**default, VARIANT: k}))
            measured = backend.evaluate(config)
            assert measured.ok, f"{config}: {measured.failure} {measured.detail}"
    finally:
        backend.close()
