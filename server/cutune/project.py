"""A kernel in a workspace: its source, template and spec; its job, tuning options and stored result there."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from cutune.cuda.headers import project_include_dirs
from cutune.cuda.model import Kernel, SourceModel
from cutune.cuda.parse import parse_source
from cutune.errors import CutuneError, SpecError
from cutune.source_file import read_source
from cutune.spec import (
    KernelSpec,
    check_against_kernel,
    draft_spec,
    dump_kernel_spec,
    load_spec,
    spec_path_for,
)
from cutune.template.diff import unified_diff
from cutune.template.model import Binding, Space, Template
from cutune.template.recipes.specialize import runtime_param
from cutune.template.templatize import templatize

if TYPE_CHECKING:  # the GPU backend and tuning load for the commands that measure, not for templatize
    from cutune.gpu.backend import Job, TimingOptions
    from cutune.tune.options import TuneOptions
    from cutune.tune.result import TuneResult

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
        spec = replace(spec, include_dirs=project_include_dirs(self.path))
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
    template_model = parse_source(template.source, str(p), rewrite=True)
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
    spec_text = dump_kernel_spec(ctx.drafted_spec(), ctx.spec_path.parent)
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
    from cutune.gpu.backend import Job, TimingOptions

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
    probe: bool = True,
) -> TuneOptions:
    """Tuning options with studies and results stored in the kernel's workspace `.cutune/`."""
    from cutune.tune.options import Budget, SearchOptions, TuneOptions

    return TuneOptions(
        workspace=workspace_dir(ctx.path),
        budget=Budget(trials=trials, seconds=seconds),
        search=SearchOptions(sampler=sampler, seed=seed, probe=probe),
        storage_url=storage_url or None,
    )


def stored_result(ctx: KernelContext) -> TuneResult | None:
    """The stored tuning result of this kernel, if any (unreadable files count as none)."""
    from cutune.tune.result import read_result, result_path

    path = result_path(workspace_dir(ctx.path) / STATE_DIR, str(ctx.path), ctx.kernel.name)
    if not path.exists():
        return None
    try:
        return read_result(path)
    except (CutuneError, OSError, ValueError, KeyError):
        return None
