"""Programmatic dependent launch, searched where its gain can be measured: under graph timing only."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from cutune.cuda.parse import parse_source
from cutune.errors import RecipeRefused
from cutune.gpu.backend import TimingOptions
from cutune.gpu.replay import read_recording
from cutune.project import KernelContext
from cutune.template.model import PDL, Refusal, Space
from cutune.template.recipes.base import Draft
from cutune.template.recipes.pdl import Pdl, pdl_param


def searches_pdl(timing: TimingOptions, replay: Path | None) -> bool:
    """Whether tuning searches PDL: under graph timing, except when replaying a recording whose space has no
    PDL (it holds only what it measured)."""
    if timing.mode != "graph":  # its gain is between back-to-back launches: only graphs time them
        return False
    return replay is None or PDL in read_recording(replay).header.get("params", {})


def with_pdl(ctx: KernelContext) -> KernelContext:
    """`ctx` searching PDL too: its final kernel (variants combined) rewritten by the pdl recipe, PDL added to
    the space it searches; unchanged, with the refusal among the template's, where the recipe refuses."""
    if any(p.name == PDL for p in ctx.space.params):
        return ctx
    template = ctx.template
    try:
        draft = Pdl().apply(ctx.template_model, ctx.template_model.kernel(ctx.kernel.name), Draft(template.source))
    except RecipeRefused as e:
        refused = (*template.refused, Refusal(e.recipe, e.reason))
        return dataclasses.replace(ctx, template=dataclasses.replace(template, refused=refused))
    template = dataclasses.replace(
        template,
        source=draft.text,
        space=_plus_pdl(template.space),
        applied=(*template.applied, Pdl.name),
    )
    spec = ctx.spec
    if spec is not None and spec.space is not None and spec.space.params:
        spec = dataclasses.replace(spec, space=_plus_pdl(spec.space))
    model = parse_source(template.source, str(ctx.path), rewrite=True)
    return dataclasses.replace(ctx, template=template, template_model=model, spec=spec)


def _plus_pdl(space: Space) -> Space:
    return dataclasses.replace(space, params=(*space.params, pdl_param()))
