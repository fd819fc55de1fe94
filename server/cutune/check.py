"""Compile-only feasibility: every configuration (or a sample) through nvcc or NVRTC, with occupancy on a target.

The compiler is tune's: `auto` compiles with NVRTC and falls back to nvcc where NVRTC cannot (saying why),
so a configuration feasible here compiles in `tune` with the same choice.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cutune.cuda.extract import extract_kernel, qualified_name
from cutune.errors import CutuneError
from cutune.gpu.nvcc import COMPILERS, CompileJob, compile_many
from cutune.gpu.occupancy import Occupancy, occupancy_of
from cutune.gpu.resources import ResourceUsage
from cutune.limits import DeviceLimits, limits_for
from cutune.project import KernelContext
from cutune.spec import KernelSpec
from cutune.template.instantiate import compile_options, instantiation
from cutune.template.model import Config, Space
from cutune.tune.space import Feasibility


@dataclass(frozen=True)
class CheckRow:
    """One configuration: the compiler's resource counts and the theoretical occupancy, or why not."""

    config: Config
    threads: int | None
    usage: ResourceUsage | None
    occupancy: Occupancy | None
    problem: str | None  # None when feasible
    compiler: str | None = None  # what compiled it ("nvrtc" or "nvcc"); None when nothing did

    @property
    def feasible(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class CheckReport:
    """The outcome of a compile-only check of one kernel."""

    kernel: str
    arch: str
    limits: DeviceLimits
    space_size: int
    rows: tuple[CheckRow, ...]
    skipped_infeasible: int  # sampled points that break a constraint or limit before compiling (not listed)
    spec_drafted: bool  # True when no spec existed and a drafted one was used
    compiler: str = "nvcc"  # the choice asked for: auto, nvrtc or nvcc
    fallback: str = ""  # with auto: why NVRTC could not compile a configuration that nvcc did


def check_kernel(
    ctx: KernelContext,
    *,
    arch: str = "sm_90",
    limit: int = 64,
    jobs: int | None = None,
    cache_dir: Path | None = None,
    seed: int = 0,
    on_done: Callable[[int, int], None] | None = None,
    compiler: str = "nvcc",
) -> CheckReport:
    """Compile the default and up to `limit - 1` sampled configurations for `arch` and rate each.

    `compiler` is auto (NVRTC, then nvcc for what NVRTC cannot compile), nvrtc or nvcc."""
    if compiler not in COMPILERS:
        raise CutuneError(f"unknown compiler {compiler!r}; choose one of {', '.join(COMPILERS)}")
    limits = limits_for(arch)
    if ctx.spec_error is not None:  # a broken spec is the user's to fix; a drafted one would hide it
        raise ctx.spec_error
    spec, drafted = (ctx.spec, False) if ctx.spec is not None else (ctx.drafted_spec(), True)
    space = ctx.space
    feasibility = Feasibility(space, spec, limits)
    configs, infeasible = _sample(space, feasibility if spec.sizes else None, limit, seed)
    rows: list[CheckRow | None] = [None] * len(configs)
    first = "nvcc" if compiler == "nvcc" else "nvrtc"
    primary, fallback = _Batch(ctx, spec, first, arch), _Batch(ctx, spec, "nvcc", arch)
    requests: dict[int, tuple[int, _Request]] = {}  # row → (threads, request)
    size = spec.sizes[0] if spec.sizes else {}
    for i, config in enumerate(configs):
        try:
            requests[i] = (_threads(spec, config, size, limits), _request(ctx, spec, config, size))
        except CutuneError as e:
            rows[i] = CheckRow(config, None, None, None, str(e))
    for i, (_, request) in requests.items():
        primary.add(i, request)
    done, total = 0, len(primary.jobs)

    def progress() -> None:
        nonlocal done
        done += 1
        if on_done:
            on_done(done, total)

    results = primary.compile(jobs, cache_dir, progress)
    used = dict.fromkeys(results, first)
    why = ""
    if compiler == "auto":  # tune's choice: nvcc for what NVRTC cannot compile
        for i, res in results.items():
            if isinstance(res, CutuneError):
                fallback.add(i, requests[i][1])
        total += len(fallback.jobs)
        for i, res in fallback.compile(jobs, cache_dir, progress).items():
            if not isinstance(res, CutuneError):  # else nvcc rejects it too: NVRTC's message says why
                why = why or f"NVRTC could not compile the unit, nvcc did: {_first_line(str(results[i]))}"
                results[i], used[i] = res, "nvcc"
    for i, res in results.items():
        threads = requests[i][0]
        if isinstance(res, CutuneError):
            rows[i] = CheckRow(configs[i], threads, None, None, f"compile: {_first_line(str(res))}")
            continue
        occ = occupancy_of(limits, res, threads, _dynamic_smem(spec, configs[i], size, limits))
        rows[i] = CheckRow(configs[i], threads, res, occ, None if occ.feasible else occ.message, used[i])
    listed = tuple(r for r in rows if r is not None)
    return CheckReport(ctx.kernel.name, arch, limits, space.size(), listed, infeasible, drafted, compiler, why)


@dataclass(frozen=True)
class _Request:
    """What one configuration compiles: the instantiation, flags and defines."""

    expression: str
    flags: tuple[str, ...]
    defines: dict[str, str]


def _request(ctx: KernelContext, spec: KernelSpec, config: Config, size: dict[str, int]) -> _Request:
    kernel = ctx.template_model.kernel(ctx.kernel.name)
    qualified = qualified_name(ctx.template_model, ctx.kernel.name)
    expr = instantiation(kernel, qualified, spec, ctx.space, config, size)
    flags, defines = compile_options(ctx.space, config, spec)
    return _Request(expr, tuple(flags), defines)


class _Batch:
    """The compile jobs of one compiler, one per distinct unit, and which rows each serves."""

    def __init__(self, ctx: KernelContext, spec: KernelSpec, compiler: str, arch: str) -> None:
        self.ctx = ctx
        self.spec = spec
        self.compiler = compiler
        self.arch = arch
        self.jobs: list[CompileJob] = []
        self._rows: list[tuple[int, int]] = []  # (row, job index)
        self._failed: dict[int, CutuneError] = {}  # rows whose unit could not be extracted

    def add(self, row: int, request: _Request) -> None:
        try:
            job = self._job(request)
        except CutuneError as e:
            self._failed[row] = e
            return
        if job not in self.jobs:
            self.jobs.append(job)
        self._rows.append((row, self.jobs.index(job)))

    def compile(
        self, workers: int | None, cache_dir: Path | None, progress: Callable[[], None]
    ) -> dict[int, ResourceUsage | CutuneError]:
        """Each row's result: the compiler's resource counts, or why it failed."""
        results = compile_many(self.jobs, workers=workers, cache_dir=cache_dir, on_done=lambda _i, _r: progress())
        return {**self._failed, **{row: results[j] for row, j in self._rows}}

    def _job(self, request: _Request) -> CompileJob:
        nvrtc = self.compiler == "nvrtc"
        unit = extract_kernel(
            self.ctx.template_model,
            self.ctx.kernel.name,
            instantiations=(request.expression,),
            include_dirs=self.spec.include_dirs,
            defines=request.defines,
            for_nvrtc=nvrtc,
            drop_includes=self.spec.includes.drop,
            substitute_includes=self.spec.includes.substitute,
        )
        return CompileJob(
            source=unit.source,
            arch=self.arch,
            flags=request.flags,
            include_dirs=unit.include_dirs,  # the spec's, the source's folder, torch's where used
            defines=unit.defines,
            # by name: headers such as <cub/cub.cuh> bring kernels of their own
            kernel=unit.name_expressions[0] if nvrtc else unit.kernel,
            compiler=self.compiler,
            name_expressions=unit.name_expressions if nvrtc else (),
        )


def _sample(space: Space, feasibility: Feasibility | None, limit: int, seed: int) -> tuple[list[Config], int]:
    """The default first, then the feasible points (all, or a seeded sample); and how many were infeasible."""
    default = space.default()
    out = [default]
    rejected = 0

    def take(c: Config) -> None:
        nonlocal rejected
        if feasibility is not None and feasibility.violation(c) is not None:
            rejected += 1
        else:
            out.append(c)

    if space.size() <= limit:
        names = [p.name for p in space.params]
        for values in itertools.product(*(p.values for p in space.params)):
            c = Config.of(dict(zip(names, values, strict=True)))
            if c != default:
                take(c)
        return out, rejected
    rng = random.Random(seed)
    seen = {default}
    for _ in range(limit * 50):  # bounded: a space that is mostly infeasible stops early
        if len(out) >= limit:
            break
        c = Config.of({p.name: rng.choice(p.values) for p in space.params})
        if c not in seen:
            seen.add(c)
            take(c)
    return out, rejected


def _names(config: Config, size: dict[str, int], limits: DeviceLimits) -> dict[str, int | float | bool]:
    return {**limits.as_names(), **size, **{k: v for k, v in config.items() if not isinstance(v, str)}}


def _threads(spec: KernelSpec, config: Config, size: dict[str, int], limits: DeviceLimits) -> int:
    _, block, _ = spec.launch(_names(config, size, limits))
    return block[0] * block[1] * block[2]


def _dynamic_smem(spec: KernelSpec, config: Config, size: dict[str, int], limits: DeviceLimits) -> int:
    return spec.launch(_names(config, size, limits))[2]


def _first_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if "error" in ln] or text.splitlines() or [""]
    return lines[0][:160]
