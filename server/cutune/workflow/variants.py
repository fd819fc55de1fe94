"""The structural variants a use case searches: tried on the kernel, stored with the study, named per size."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from cutune.project import KernelContext
from cutune.template.variants import VARIANT, Combined, Variant, combine_all
from cutune.template.variants.store import ATTR, variants_from_json, variants_json

if TYPE_CHECKING:  # tuning loads for the commands that tune, not for templatize
    from cutune.tune.result import TuneResult


def variants_of(ctx: KernelContext) -> Combined:
    """Every structural transform tried on the kernel: its variants behind VARIANT, and why others refused."""
    return combine_all(ctx.template_model, ctx.kernel.name, ctx.template, ctx.spec)


def with_combined(ctx: KernelContext, combined: Combined) -> KernelContext:
    """`ctx` searching `combined` (the recipes' template and the variants, with the spec that launches them)."""
    if not combined.variants:
        return ctx
    return replace(ctx, template=combined.template, template_model=combined.model, spec=combined.spec)


def searches_variants(choice: bool | None, replay: Path | None) -> bool:
    """Whether tuning searches the structural variants: `choice` when given; by default yes, except when
    replaying a recording whose space has no VARIANT (it holds only what it measured)."""
    from cutune.gpu.replay import read_recording

    if choice is not None:
        return choice
    return replay is None or VARIANT in read_recording(replay).header.get("params", {})


def store_variants(storage: str, study: str, variants: Sequence[Variant]) -> tuple[Variant, ...] | None:
    """Store the searched variants with the study (source, parameters, launch, provenance); returns the
    variants an earlier run stored there instead, when it did (a resumed study keeps its first ones)."""
    # Optuna loads for a run that stores, not for every command that shows variants
    from cutune.tune.study import load_study

    stored = load_study(storage, study)
    if ATTR in stored.user_attrs:
        return variants_from_json(stored.user_attrs[ATTR])
    stored.set_user_attr(ATTR, variants_json(variants))
    return None


def variant_names(result: TuneResult, variants: Sequence[Variant]) -> list[str]:
    """The variant each spec size of `result` runs ("original" for VARIANT = 0), in size order."""
    names = ["original", *(v.name for v in variants)]
    return [names[int(s.best_config.get(VARIANT, 0))] for s in result.sizes]  # type: ignore[arg-type]
