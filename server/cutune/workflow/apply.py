"""Writing a tuning result into the source: the tuned values, a per-size dispatch, or the winning variant."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from cutune.apply.config import apply_config, apply_dispatch, launchable
from cutune.apply.pdl import with_dependent_launch
from cutune.cuda.extract import kernel_hash
from cutune.cuda.parse import parse_source
from cutune.errors import CutuneError
from cutune.project import KernelContext, open_kernel
from cutune.source_file import text_hash
from cutune.template.edits import apply_edits
from cutune.template.model import PDL, Binding, Config, Space
from cutune.template.recipes.index_bits import widened
from cutune.template.variants import VARIANT, Combined, Variant, combine, keep_variant, winning_variant
from cutune.template.variants.host_launch import HostLaunchError
from cutune.tune.dispatch import DispatchPlan
from cutune.tune.result import TuneResult
from cutune.workflow.pdl import with_pdl
from cutune.workflow.variants import variants_of, with_combined


@dataclass(frozen=True)
class AppliedResult:
    """The file's text with a configuration written in, and the compile flags it needs besides."""

    text: str
    flags: tuple[str, ...]  # FLAG and DEFINE parameters: a source cannot hold them
    notes: tuple[str, ...] = ()  # what was written otherwise than tuned, and why


def apply_to_source(ctx: KernelContext, config: Config) -> AppliedResult:
    """The file with `config` as the kernel's defaults, templatizing it first when it is not yet."""
    space = ctx.space
    applied = apply_config(
        ctx.template_model, ctx.kernel.name, config, space, specialized_values=_specialized_values(ctx, space)
    )
    return AppliedResult(apply_edits(ctx.template.source, applied.edits), applied.flags)


def _specialized_values(ctx: KernelContext, space: Space) -> dict[str, list[int]]:
    spec_sizes = ctx.spec.sizes if ctx.spec is not None else ()
    return {
        p.arg: sorted({size[p.arg] for size in spec_sizes if p.arg in size})
        for p in space.params
        if p.binding is Binding.SPECIALIZE and p.arg
    }


def apply_result(ctx: KernelContext, result: TuneResult, *, combined: Combined | None = None) -> AppliedResult:
    """The file with what tuning found: a per-size dispatch at the launch when sizes launch different
    configurations, else the one configuration as the kernel's defaults. With structural variants: the
    winning variant's body alone (`keep_variant`) when one variant runs at every size, else the kernel with
    its variants behind VARIANT and a dispatch whose branches launch each variant with its own grid and block.
    `combined` is the template the result was tuned on (`variants_of(ctx)`, recomputed when not given). PDL,
    where tuning chose it, is written last: the kernel's wait and every launch's attribute."""
    if PDL not in result.original:
        return _applied(ctx, result, combined, dependent=False)
    applied = _applied(ctx, result.without(PDL), combined, dependent=True)
    if not result.per_file.get(PDL, False):
        return applied
    text, why = with_dependent_launch(applied.text, str(ctx.path), ctx.kernel.name)
    if why:
        return replace(applied, notes=(*applied.notes, f"PDL won, but the file keeps its ordinary launch: {why}"))
    return replace(
        applied, text=text, notes=(*applied.notes, "PDL won: written as griddepcontrol and each launch's attribute")
    )


def _applied(ctx: KernelContext, result: TuneResult, combined: Combined | None, *, dependent: bool) -> AppliedResult:
    """`apply_result` without PDL; `dependent`: the kernel was tuned with PDL's prologue (it is in its hash)."""
    dispatch = result.dispatch
    # one configuration everywhere is written as the defaults, unless it computes indices in 32 bits: that one is
    # launched under the dispatch's guard on the sizes
    guarded = dispatch is not None and any(widened(c) is not None for c in dispatch.configs)
    plan = dispatch if dispatch is not None and (len(dispatch.configs) > 1 or guarded) else None
    launched = result.launched()
    single = launched[0] if len(launched) == 1 else result.best
    sizes = [s.size for s in result.sizes]
    note = f"tuned on timings {result.replayed.label()}" if result.replayed else f"tuned {result.measured_on()}"
    if VARIANT not in result.original:
        return _written(ctx, ctx.space, plan, single, sizes, note)
    combined = combined or variants_of(ctx)
    tuned = with_combined(ctx, combined)
    missing = sorted(set(result.original) - {p.name for p in tuned.space.params})
    measured = with_pdl(tuned) if dependent else tuned
    # VARIANT = k means the k-th variant of the run that tuned: the kernel it measured must be this one
    if missing or (result.kernel_hash and kernel_hash(measured.template_model, ctx.kernel.name) != result.kernel_hash):
        raise CutuneError(
            f"the structural variants of {ctx.kernel.name} differ from those it was tuned with "
            f"({', '.join(missing) + ' missing; ' if missing else ''}the transforms or the kernel changed): "
            "tune it again"
        )
    notes: tuple[str, ...] = ()
    if plan is not None:
        plan, notes = launchable(tuned.template_model, ctx.kernel.name, plan, result.original, combined.variants)
    winner = winning_variant(plan.configs if plan is not None else launched)
    if winner is None:  # variants differ by size: the combined kernel, each branch launching its own
        if plan is not None:
            combined, plan = _launched_variants(ctx, combined, plan)
            tuned = with_combined(ctx, combined)
        return replace(_written(tuned, tuned.space, plan, single, sizes, note, combined.variants), notes=notes)
    base = {p.name for p in ctx.space.params}
    if winner == 0:
        applied = _written(ctx, ctx.space, _only(plan, base), _narrow(result.original, base), sizes, note)
        return replace(applied, notes=notes)
    variant = combined.variants[winner - 1]
    try:
        kept = keep_variant(ctx.template_model, ctx.kernel.name, variant, single)
    except HostLaunchError as e:
        applied = _written(ctx, ctx.space, None, _narrow(result.original, base), sizes, note)
        why = f"variant {variant.name} won at every size, but the file keeps the original: its launch cannot be "
        return replace(applied, notes=(f"{why}written at the launch site ({e})",))
    names = base | {p.name for p in variant.params}
    space = Space((*ctx.space.params, *variant.params), ctx.space.constraints)
    pruned = replace(
        ctx,
        template=replace(ctx.template, source=kept, space=space),
        template_model=parse_source(kept, str(ctx.path), rewrite=True),
    )
    applied = _written(pruned, space, _only(plan, names), _narrow(single, names), sizes, note)
    return replace(
        applied, notes=(f"variant {variant.name} runs at every size: written as the kernel's body", *applied.notes)
    )


def _launched_variants(ctx: KernelContext, combined: Combined, plan: DispatchPlan) -> tuple[Combined, DispatchPlan]:
    """The kernel with only the variants some branch of `plan` launches (renumbered in their order), and
    `plan` in its terms: the others are code nobody would keep."""
    used = sorted({int(c.get(VARIANT, 0)) for c in plan.configs} - {0})
    if len(used) == len(combined.variants):
        return combined, plan
    launched = [combined.variants[k - 1] for k in used]
    kept = combine(ctx.template_model, ctx.kernel.name, ctx.template, ctx.spec, launched)
    number = {0: 0, **{old: new for new, old in enumerate(used, 1)}}
    names = {p.name for p in kept.template.space.params}

    def renumbered(config: Config) -> Config:
        return Config.of({k: number[int(v)] if k == VARIANT else v for k, v in config.items() if k in names})

    return kept, plan.with_configs(renumbered)


def _written(
    ctx: KernelContext,
    space: Space,
    plan: DispatchPlan | None,
    config: Config,
    sizes: list[dict[str, int]],
    note: str,
    variants: Sequence[Variant] = (),
) -> AppliedResult:
    """`ctx`'s template with `plan` dispatched at its launches, or `config` as its defaults."""
    notes: tuple[str, ...] = ()
    if plan is None and (wide := widened(config)) is not None:
        notes = ("INDEX_BITS=32 won, but with no per-size dispatch to guard it the file keeps 64-bit indices",)
        config = wide
    if plan is None or (len(plan.configs) < 2 and widened(plan.configs[0]) is None):
        applied = apply_config(
            ctx.template_model, ctx.kernel.name, config, space, specialized_values=_specialized_values(ctx, space)
        )
    else:
        extents = ctx.spec.extent_exprs() if ctx.spec is not None else ()
        applied = apply_dispatch(
            ctx.template_model, ctx.kernel.name, plan, space, sizes, note=note, variants=variants, extents=extents
        )
    return AppliedResult(apply_edits(ctx.template.source, applied.edits), applied.flags, (*notes, *applied.notes))


def _only(plan: DispatchPlan | None, names: set[str]) -> DispatchPlan | None:
    """`plan` with every configuration narrowed to `names` (ranges that then launch the same one merged)."""
    return None if plan is None else plan.with_configs(lambda c: _narrow(c, names))


def _narrow(config: Config, names: set[str]) -> Config:
    return Config.of({k: v for k, v in config.items() if k in names})


def result_is_current(ctx: KernelContext, result: TuneResult) -> bool:
    """Whether `result` was measured on this kernel as it is now (tuned values written in or not)."""
    # the result hashes the templated file at the defaults it was tuned from: put those back, compare
    try:
        base = {p.name for p in ctx.space.params}
        source = apply_to_source(ctx, _narrow(result.original, base)).text
        if VARIANT in result.original or PDL in result.original:
            searched = open_kernel(ctx.path, ctx.kernel.name, text=source)
            if VARIANT in result.original:  # tuned on the combined template at its defaults: combine this file too
                searched = with_combined(searched, variants_of(searched))
            if PDL in result.original:  # and with PDL's prologue, under graph timing
                searched = with_pdl(searched)
            source = searched.template.source
    except CutuneError:  # the space or the struct changed: not what was tuned
        return False
    if result.kernel_hash:  # per kernel: edits to other kernels or host code leave it current
        return kernel_hash(parse_source(source, str(ctx.path), rewrite=True), ctx.kernel.name) == result.kernel_hash
    return text_hash(source) == result.source_hash
