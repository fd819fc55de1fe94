"""A kernel in a workspace: its source, template, spec and stored results — what the CLI and LSP share."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cutune.cuda.extract import kernel_hash
from cutune.cuda.model import Kernel, SourceModel
from cutune.cuda.parse import parse_source
from cutune.errors import CutuneError, SpecError
from cutune.gpu.backend import Job, TimingOptions
from cutune.gpu.replay import read_recording
from cutune.source_file import read_source, text_hash
from cutune.template.apply import apply_config, apply_dispatch, launchable
from cutune.template.diff import unified_diff
from cutune.template.dispatch import DispatchPlan
from cutune.template.edits import apply_edits
from cutune.template.model import Binding, Config, Space, Template
from cutune.template.recipes.specialize import runtime_param
from cutune.template.spec import (
    KernelSpec,
    check_against_kernel,
    draft_spec,
    dump_kernel_spec,
    load_spec,
    spec_path_for,
)
from cutune.template.templatize import templatize
from cutune.template.variants import VARIANT, Combined, Variant, combine, combine_all, keep_variant, winning_variant
from cutune.template.variants.host_launch import HostLaunchError
from cutune.template.variants.store import ATTR, variants_from_json, variants_json
from cutune.tune.options import Budget, SearchOptions, TuneOptions
from cutune.tune.result import TuneResult, read_result, result_path
from cutune.tune.study import load_study

STATE_DIR = ".cutune"


@dataclass(frozen=True)
class KernelContext:
    """One kernel of one file, templatized in memory, with its spec when it has a valid one."""

    path: Path
    model: SourceModel  # the file as it is
    kernel: Kernel
    template: Template  # the templatized file (the file itself when it is templatized already)
    template_model: SourceModel
    spec_path: Path
    spec: KernelSpec | None  # None when the file has no spec for this kernel
    spec_error: SpecError | None  # why the spec could not be used

    @property
    def space(self) -> Space:
        """The space to search: the spec's params when it lists any, else the recipes' space."""
        if self.spec is not None and self.spec.space is not None and self.spec.space.params:
            return self.spec.space
        return self.template.space

    def drafted_spec(self) -> KernelSpec:
        """A spec guessed from the templatized kernel's signature and launch site."""
        kernel = self.template_model.kernel(self.kernel.name)
        launches = self.template_model.launches_of(kernel.name)
        spec = draft_spec(kernel, launches[0] if launches else None, self.template.space, self.template_model)
        # specialised size arguments are renamed in the kernel (d → d_rt): the spec keeps the user's names
        renamed = {
            runtime_param(p.arg): p.arg for p in self.template.space.params if p.binding is Binding.SPECIALIZE and p.arg
        }
        if not renamed:
            return spec
        return _renamed(spec, renamed)

    def require_spec(self) -> KernelSpec:
        """The spec, or a SpecError that says how to get one."""
        if self.spec_error is not None:
            raise self.spec_error
        if self.spec is None:
            raise SpecError(
                f"no tuning spec for kernel {self.kernel.name!r}; run `cutune templatize {self.path} "
                f"--kernel {self.kernel.name} --write` to draft one, then fill in its sizes",
                path=str(self.spec_path),
            )
        return self.spec


def _renamed(spec: KernelSpec, names: dict[str, str]) -> KernelSpec:
    """The spec with some argument/size names replaced everywhere they are written."""
    word = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")

    def sub(text: str) -> str:
        return word.sub(lambda m: names[m.group(0)], text)

    args = tuple(
        replace(
            a,
            name=names.get(a.name, a.name),
            shape=tuple(map(sub, a.shape)) if a.shape is not None else None,
            value=sub(a.value) if a.value is not None else None,
        )
        for a in spec.args
    )
    return replace(
        spec,
        args=args,
        sizes=tuple({names.get(k, k): v for k, v in size.items()} for size in spec.sizes),
        grid=tuple(map(sub, spec.grid)),
        block=tuple(map(sub, spec.block)),
        shared_mem=sub(spec.shared_mem),
    )


def open_kernel(
    path: str | Path, kernel: str, *, text: str | None = None, recipes: tuple[str, ...] | None = None
) -> KernelContext:
    """Parse a file, find the kernel, templatize it in memory and load its spec (if any)."""
    if text is None:
        p, text = read_source(path)
    else:
        p = Path(path)
    model = parse_source(text, str(p))
    k = model.kernel(kernel)
    template = templatize(model, kernel, recipes=recipes)
    template_model = parse_source(template.source, str(p))
    spec_path = spec_path_for(p)
    spec: KernelSpec | None = None
    spec_error: SpecError | None = None
    if spec_path.exists():
        try:
            spec_file = load_spec(spec_path)
            if kernel in spec_file.kernels:
                spec = spec_file.kernels[kernel]
                check_against_kernel(spec, template_model.kernel(kernel))
        except SpecError as e:
            spec, spec_error = None, e
    return KernelContext(p, model, k, template, template_model, spec_path, spec, spec_error)


@dataclass(frozen=True)
class TemplatizeOutcome:
    """What templatize changed: the unified diff, the drafted spec text, and what was written."""

    context: KernelContext
    diff: str
    spec_text: str
    wrote_source: bool
    wrote_spec: bool


def templatize_file(
    path: str | Path, kernel: str, *, write: bool = False, recipes: tuple[str, ...] | None = None
) -> TemplatizeOutcome:
    """Templatize one kernel; with `write`, rewrite the file and create its spec when it has none."""
    ctx = open_kernel(path, kernel, recipes=recipes)
    diff = unified_diff(ctx.model.text, ctx.template.source, ctx.path.name)
    spec_text = dump_kernel_spec(ctx.drafted_spec())
    wrote_source = wrote_spec = False
    if write:
        if ctx.template.source != ctx.model.text:
            ctx.path.write_text(ctx.template.source, encoding="utf-8")
            wrote_source = True
        if not ctx.spec_path.exists():
            ctx.spec_path.write_text(spec_text, encoding="utf-8")
            wrote_spec = True
        elif ctx.spec is None and ctx.spec_error is None:
            # the spec file exists but has no table for this kernel: append one
            with ctx.spec_path.open("a", encoding="utf-8") as f:
                f.write("\n" + spec_text)
            wrote_spec = True
    return TemplatizeOutcome(ctx, diff, spec_text, wrote_source, wrote_spec)


def workspace_dir(path: Path) -> Path:
    """The workspace root for a file: the nearest parent with `.cutune/`, `.git` or `pyproject.toml`."""
    for parent in [path.parent.resolve(), *path.parent.resolve().parents]:
        if any((parent / marker).exists() for marker in (STATE_DIR, ".git", "pyproject.toml")):
            return parent
    return path.parent.resolve()


def build_job(ctx: KernelContext, *, timing: TimingOptions | None = None, seed: int = 0) -> Job:
    """The measuring job for a kernel: its template, spec and space (needs a valid spec)."""
    return Job(
        source_path=str(ctx.path),
        template=ctx.template,
        spec=ctx.require_spec(),
        space=ctx.space,
        timing=timing or TimingOptions(),
        seed=seed,
    )


def tune_options(
    ctx: KernelContext,
    *,
    trials: int,
    seconds: float | None,
    sampler: str = "auto",
    storage_url: str | None = None,
    seed: int = 0,
) -> TuneOptions:
    """Tuning options with studies and results stored in the kernel's workspace `.cutune/`."""
    return TuneOptions(
        workspace=workspace_dir(ctx.path),
        budget=Budget(trials=trials, seconds=seconds),
        search=SearchOptions(sampler=sampler, seed=seed),
        storage_url=storage_url or None,
    )


def stored_result(ctx: KernelContext) -> TuneResult | None:
    """The stored tuning result of this kernel, if any (unreadable files count as none)."""
    path = result_path(workspace_dir(ctx.path) / STATE_DIR, str(ctx.path), ctx.kernel.name)
    if not path.exists():
        return None
    try:
        return read_result(path)
    except (CutuneError, OSError, ValueError, KeyError):
        return None


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
    `combined` is the template the result was tuned on (`variants_of(ctx)`, recomputed when not given)."""
    plan = result.dispatch if result.dispatch is not None and len(result.dispatch.configs) > 1 else None
    launched = result.launched()
    single = launched[0] if len(launched) == 1 else result.best
    sizes = [s.size for s in result.sizes]
    note = f"tuned on timings {result.replayed.label()}" if result.replayed else f"tuned {result.measured_on()}"
    if VARIANT not in result.original:
        return _written(ctx, ctx.space, plan, single, sizes, note)
    combined = combined or variants_of(ctx)
    tuned = with_combined(ctx, combined)
    missing = sorted(set(result.original) - {p.name for p in tuned.space.params})
    # VARIANT = k means the k-th variant of the run that tuned: the kernel it measured must be this one
    if missing or (result.kernel_hash and kernel_hash(tuned.template_model, ctx.kernel.name) != result.kernel_hash):
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
        template_model=parse_source(kept, str(ctx.path)),
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
    if plan is None or len(plan.configs) < 2:
        applied = apply_config(
            ctx.template_model, ctx.kernel.name, config, space, specialized_values=_specialized_values(ctx, space)
        )
    else:
        applied = apply_dispatch(ctx.template_model, ctx.kernel.name, plan, space, sizes, note=note, variants=variants)
    return AppliedResult(apply_edits(ctx.template.source, applied.edits), applied.flags, applied.notes)


def _only(plan: DispatchPlan | None, names: set[str]) -> DispatchPlan | None:
    """`plan` with every configuration narrowed to `names` (ranges that then launch the same one merged)."""
    return None if plan is None else plan.with_configs(lambda c: _narrow(c, names))


def _narrow(config: Config, names: set[str]) -> Config:
    return Config.of({k: v for k, v in config.items() if k in names})


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
    if choice is not None:
        return choice
    return replay is None or VARIANT in read_recording(replay).header.get("params", {})


def store_variants(storage: str, study: str, variants: Sequence[Variant]) -> tuple[Variant, ...] | None:
    """Store the searched variants with the study (source, parameters, launch, provenance); returns the
    variants an earlier run stored there instead, when it did (a resumed study keeps its first ones)."""
    stored = load_study(storage, study)
    if ATTR in stored.user_attrs:
        return variants_from_json(stored.user_attrs[ATTR])
    stored.set_user_attr(ATTR, variants_json(variants))
    return None


def variant_names(result: TuneResult, variants: Sequence[Variant]) -> list[str]:
    """The variant each spec size of `result` runs ("original" for VARIANT = 0), in size order."""
    names = ["original", *(v.name for v in variants)]
    return [names[int(s.best_config.get(VARIANT, 0))] for s in result.sizes]  # type: ignore[arg-type]


def result_is_current(ctx: KernelContext, result: TuneResult) -> bool:
    """Whether `result` was measured on this kernel as it is now (tuned values written in or not)."""
    # the result hashes the templated file at the defaults it was tuned from: put those back, compare
    try:
        base = {p.name for p in ctx.space.params}
        source = apply_to_source(ctx, _narrow(result.original, base)).text
        if VARIANT in result.original:  # tuned on the combined template at its defaults: combine this file too
            source = variants_of(open_kernel(ctx.path, ctx.kernel.name, text=source)).template.source
    except CutuneError:  # the space or the struct changed: not what was tuned
        return False
    if result.kernel_hash:  # per kernel: edits to other kernels or host code leave it current
        return kernel_hash(parse_source(source, str(ctx.path)), ctx.kernel.name) == result.kernel_hash
    return text_hash(source) == result.source_hash
