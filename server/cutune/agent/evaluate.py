"""Test functions for the agent loop: a compile-only check (any machine with nvcc) or a tune (a GPU).

Scores are lower-is-better. Compile-only cannot time anything, so it prefers the template that leaves
the search the most configurations that compile, launch and do not spill: minus their count among
the checked ones. A tune scores by the tuned time relative to the original (1 / speedup), which
compares across templates because every template's defaults behave as the original kernel.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from cutune.agent.history import TestOutcome
from cutune.check import check_kernel
from cutune.cuda.parse import parse_source
from cutune.gpu.backend import Backend
from cutune.project import KernelContext, build_job
from cutune.template.model import Template
from cutune.tune import TuneOptions, tune


def context_with(ctx: KernelContext, template: Template) -> KernelContext:
    """`ctx` around another template; its space replaces the spec's own parameters, if the spec lists any."""
    spec = ctx.spec
    if spec is not None and spec.space is not None:
        spec = dataclasses.replace(spec, space=None)
    model = parse_source(template.source, str(ctx.path), rewrite=True)
    return dataclasses.replace(ctx, template=template, template_model=model, spec=spec)


def compile_only_test(
    ctx: KernelContext, *, arch: str = "sm_90", limit: int = 32, cache_dir: Path | None = None
) -> Callable[[Template], TestOutcome]:
    """A test compiling up to `limit` configurations as tune does; score: minus the clean, runnable ones."""

    def test(template: Template) -> TestOutcome:
        report = check_kernel(context_with(ctx, template), arch=arch, limit=limit, cache_dir=cache_dir)
        clean = [r for r in report.rows if r.feasible and r.usage is not None and not r.usage.spills]
        summary = (
            f"{len(clean)} of {len(report.rows)} checked configurations (of {report.space_size}) "
            f"compile for {arch}, launch and do not spill"
        )
        return TestOutcome(-float(len(clean)), summary, check=report)

    return test


def tuning_test(ctx: KernelContext, backend: Backend, options: TuneOptions) -> Callable[[Template], TestOutcome]:
    """A test tuning each template on the backend's GPU; score: 1 / speedup over the original."""

    def test(template: Template) -> TestOutcome:
        result = tune(build_job(context_with(ctx, template)), backend, options)
        verdict = "significant" if result.significant else "not significant"
        summary = f"{result.speedup:.3f}x over the original ({verdict}, {result.trials} configurations measured)"
        return TestOutcome(1.0 / result.speedup, summary, result=result)

    return test
