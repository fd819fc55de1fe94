"""`check` and the compile path of `tune`, kernel by kernel, over the production corpora: every kernel with a
launch in its file gets a spec drafted by cutune (template arguments, grid and block filled in here where the
draft leaves a TODO), its original is checked (`check_kernel`) and compiled as tune's worker compiles it
(`JobBuilder`, the backend's compile path without CuPy), and the two must agree. Shared by
tests/corpus/test_agreement.py (a slice) and benchmarks/corpus_compile.py (every kernel)."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from cutune.check import check_kernel
from cutune.cuda.lists import split_top_level
from cutune.errors import CutuneError
from cutune.gpu.build import JobBuilder
from cutune.gpu.compile import first_error
from cutune.gpu.compile_cache import CompileCache
from cutune.project import KernelContext, build_job, open_kernel
from cutune.spec import KernelSpec
from cutune.spec.load import TODO
from cutune.spec.ragged import ragged_sizes

from .corpus import instantiation
from .sources import Corpus


@dataclass(frozen=True)
class Outcome:
    """What one side made of a kernel's original: compiled (with which compiler, how), or why not."""

    compiled: bool
    compiler: str = ""
    build: tuple[str, ...] = ()  # the compiler, its options and the unit's hash: what decides the binary
    error: str = ""
    fallback: str = ""


@dataclass(frozen=True)
class Agreement:
    """One corpus kernel: what `check` said, what tune's compile path did, and whether they agree."""

    corpus: str
    file: str
    kernel: str
    filled: tuple[str, ...]  # what the test filled in where the draft left a TODO
    check: Outcome
    tune: Outcome

    @property
    def agree(self) -> bool:
        """Both compile it with the same compiler, options and unit, or neither does."""
        if self.check.compiled != self.tune.compiled:
            return False
        return not self.check.compiled or self.check.build == self.tune.build

    def failure_class(self) -> str:
        """The check's compile error without what varies between kernels (paths, line numbers, names)."""
        return error_class(self.check.error) if not self.check.compiled else ""


def launched_kernels(corpus: Corpus) -> list[tuple[Path, str]]:
    """Every (file, kernel) of the corpus whose file launches the kernel, in path order (overloads once: cutune
    names a kernel by its name)."""
    from cutune.cuda.parse import parse_source

    found = []
    for path in corpus.files:
        model = parse_source(path.read_text(encoding="utf-8", errors="replace"), str(path))
        found += [(path, k.name) for k in model.kernels if model.launches_of(k.name)]
    return list(dict.fromkeys(found))


def agreement(corpus: Corpus, path: Path, kernel: str, cache: CompileCache, *, arch: str = "sm_90") -> Agreement:
    """Check the kernel's original and compile it as tune's worker does; never raises for a kernel's fault."""
    rel = str(path.relative_to(corpus.root))
    try:
        ctx = open_kernel(path, kernel)
        spec, filled = filled_spec(ctx, corpus)
    except CutuneError as e:
        failed = Outcome(False, error=f"open: {first_error(e)}")
        return Agreement(corpus.name, rel, kernel, (), failed, failed)
    ctx = dataclasses.replace(ctx, spec=spec, spec_error=None)
    return Agreement(corpus.name, rel, kernel, filled, _check(ctx, arch, cache), _tune(ctx, arch, cache))


def _check(ctx: KernelContext, arch: str, cache: CompileCache) -> Outcome:
    try:
        report = check_kernel(ctx, arch=arch, limit=1, jobs=1, cache_dir=cache.directory)
    except CutuneError as e:
        return Outcome(False, error=f"check: {first_error(e)}")
    row = report.rows[0]
    if row.build is None:
        return Outcome(False, error=row.problem or "")
    b = row.build
    return Outcome(True, row.compiler or "", (b.compiler, *b.options, b.source_hash), fallback=report.fallback)


def _tune(ctx: KernelContext, arch: str, cache: CompileCache) -> Outcome:
    """The original as the CuPy backend compiles it: at every spec size and ragged size, the first size's
    instantiation is the one `check` compiles."""
    try:
        job = build_job(ctx)
        builder = JobBuilder(job, arch=arch, compiler="auto", cache=cache)
        sizes = [*job.spec.sizes, *(r.size for r in ragged_sizes(job.spec))]
        key, per_size = builder.key(job.space.default(), sizes)
        compiled = builder.compile(key)
    except CutuneError as e:
        return Outcome(False, error=first_error(e))
    b = compiled.kernel(per_size[0]).build
    return Outcome(True, compiled.compiler, (b.compiler, *b.options, b.source_hash), fallback=compiled.fallback)


def filled_spec(ctx: KernelContext, corpus: Corpus) -> tuple[KernelSpec, tuple[str, ...]]:
    """The drafted spec with the corpus' include folders, and what the draft leaves TODO filled in: template
    arguments (the corpus' plausible ones), grid and block (one block of 128 threads: compiling needs no
    launch), shared memory (none)."""
    spec = ctx.drafted_spec()
    filled = []
    guessed = _template_args(ctx)
    args = dict(spec.template_args)
    for name, value in args.items():
        if value.startswith(TODO) and name in guessed:
            args[name] = guessed[name]
            filled.append(f"template_args.{name}")
    changes: dict[str, object] = {"template_args": args, "include_dirs": tuple(str(d) for d in corpus.include_dirs)}
    for key, default in (("grid", ("1",)), ("block", ("128",))):
        if any(d.startswith(TODO) for d in getattr(spec, key)):
            changes[key] = default
            filled.append(key)
    if spec.shared_mem.startswith(TODO):
        changes["shared_mem"] = "0"
        filled.append("shared_mem")
    return dataclasses.replace(spec, **changes), tuple(filled)  # type: ignore[arg-type]


def _template_args(ctx: KernelContext) -> dict[str, str]:
    """The corpus' plausible template arguments of the (templatized) kernel, by template parameter."""
    kernel = ctx.template_model.kernel(ctx.kernel.name)
    expression, _ = instantiation(kernel, ctx.template_model)
    inner = expression[expression.find("<") + 1 : -1] if "<" in expression else ""
    return dict(
        zip(
            (t.name for t in kernel.template_params),
            [p.strip() for p in split_top_level(inner, "()<>")] if inner.strip() else [],
            strict=False,
        )
    )


def sweep(
    corpora: Sequence[Corpus],
    cache: CompileCache,
    *,
    only: Callable[[Corpus, Path, str], bool] | None = None,
    workers: int = 2,
) -> list[Agreement]:
    """Every launched kernel of `corpora` (or those `only` keeps), in parallel, in corpus and path order."""
    todo = [(c, p, k) for c in corpora for p, k in launched_kernels(c) if only is None or only(c, p, k)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda t: agreement(t[0], t[1], t[2], cache), todo))


def error_class(error: str) -> str:
    """A compile error's class: its message without file paths, line numbers, quoted names and numbers."""
    text = re.sub(r"^.*?(?=(?:catastrophic |fatal )?error)", "", error)
    text = re.sub(r'"[^"]*"|\'[^\']*\'|`[^`]*`', "…", text)
    text = re.sub(r"\([^()]*\)$", "", text).strip()
    return re.sub(r"\b\d+\b", "N", text)[:120]


def summary(results: Sequence[Agreement]) -> dict[str, object]:
    """Counts for the record: kernels, originals that compile (by compiler), agreements, failure classes."""
    compiled = [r for r in results if r.check.compiled]
    return {
        "kernels": len(results),
        "by_corpus": dict(Counter(r.corpus for r in results)),
        "originals_compile": len(compiled),
        "by_compiler": dict(Counter(r.check.compiler for r in compiled)),
        "agree": sum(r.agree for r in results),
        "disagree": [f"{r.corpus}:{r.file}:{r.kernel}" for r in results if not r.agree],
        "failure_classes": dict(Counter(r.failure_class() for r in results if not r.check.compiled).most_common()),
    }
