"""On a real GPU: every variant of the samples written in the canonical forms' shapes, at several configurations,
equals the original at every size of its spec (the backend checks each against the original kernel; skipped
without a CUDA GPU)."""

from __future__ import annotations

import dataclasses

import pytest

from cutune.gpu.backend import TimingOptions
from cutune.gpu.registry import create_backend
from cutune.project import build_job
from cutune.template.model import Config
from cutune.template.variants import combine_all

from .test_samples import CASES, INSTANTIATIONS, spec_context


@pytest.mark.gpu
@pytest.mark.parametrize(("file", "kernel", "template_args"), INSTANTIATIONS)
def test_every_variant_equals_the_original_on_the_gpu(file: str, kernel: str, template_args: dict[str, str]) -> None:
    ctx = spec_context(file, kernel, template_args)
    combined = combine_all(ctx.template_model, kernel, ctx.template, ctx.spec)
    assert [v.name for v in combined.variants] == list(CASES[file, kernel])
    ctx = dataclasses.replace(ctx, template=combined.template, template_model=combined.model, spec=combined.spec)
    backend = create_backend("cupy")
    backend.open(build_job(ctx, timing=TimingOptions(warmup=1, reps=3, min_time_ms=0.0)))
    default = ctx.space.default()
    try:
        for k, variant in enumerate(combined.variants, 1):
            for values in CASES[file, kernel][variant.name]:
                config = Config.of({**default, "VARIANT": k, **values})
                measured = backend.evaluate(config)
                assert measured.ok, f"{variant.name} {config}: {measured.failure} {measured.detail}"
    finally:
        backend.close()
