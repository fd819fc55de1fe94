"""Compile-only feasibility: every configuration (or a sample) through nvcc, with occupancy on a target."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cutune.cuda.extract import extract_kernel, qualified_name
from cutune.errors import CutuneError
from cutune.gpu.limits import DeviceLimits, limits_for
from cutune.gpu.nvcc import CompileJob, compile_many
from cutune.gpu.occupancy import Occupancy, occupancy_of
from cutune.gpu.resources import ResourceUsage
from cutune.project import KernelContext
from cutune.template.instantiate import compile_options, instantiation
from cutune.template.model import Config, Space
from cutune.template.spec import KernelSpec
from cutune.tune.space import Feasibility


@dataclass(frozen=True)
class CheckRow:
    """One configuration: the compiler's resource counts and the theoretical occupancy, or why not."""

    config: Config
    threads: int | None
    usage: ResourceUsage | None
    occupancy: Occupancy | None
    problem: str | None  # None when feasible

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


def check_kernel(
    ctx: KernelContext,
    *,
    arch: str = "sm_90",
    limit: int = 64,
    jobs: int | None = None,
    cache_dir: Path | None = None,
    seed: int = 0,
    on_done: Callable[[int, int], None] | None = None,
) -> CheckReport:
    """Compile the default and up to `limit - 1` sampled configurations for `arch` and rate each."""
    limits = limits_for(arch)
    if ctx.spec_error is not None:  # a broken spec is the user's to fix; a drafted one would hide it
        raise ctx.spec_error
    spec, drafted = (ctx.spec, False) if ctx.spec is not None else (ctx.drafted_spec(), True)
    space = ctx.space
    feasibility = Feasibility(space, spec, limits)
    configs, infeasible = _sample(space, feasibility if spec.sizes else None, limit, seed)
    rows: list[CheckRow | None] = [None] * len(configs)
    compile_jobs: list[CompileJob] = []
    job_of: dict[CompileJob, int] = {}
    pending: list[tuple[int, int, int]] = []  # (row, job index, threads)
    kernel = ctx.template_model.kernel(ctx.kernel.name)
    qualified = qualified_name(ctx.template_model, ctx.kernel.name)
    size = spec.sizes[0] if spec.sizes else {}
    for i, config in enumerate(configs):
        try:
            threads = _threads(spec, config, size, limits)
            expr = instantiation(kernel, qualified, spec, space, config, size)
            flags, defines = compile_options(space, config, spec)
            unit = extract_kernel(
                ctx.template_model,
                ctx.kernel.name,
                instantiations=(expr,),
                include_dirs=spec.include_dirs,
                defines=defines,
            )
        except CutuneError as e:
            rows[i] = CheckRow(config, None, None, None, str(e))
            continue
        job = CompileJob(
            source=unit.source,
            arch=arch,
            flags=tuple(flags),
            include_dirs=unit.include_dirs,  # the spec's, the source's folder, torch's where used
            kernel=qualified,  # by name: headers such as <cub/cub.cuh> bring kernels of their own
        )
        if job not in job_of:
            job_of[job] = len(compile_jobs)
            compile_jobs.append(job)
        pending.append((i, job_of[job], threads))
    results = compile_many(
        compile_jobs,
        workers=jobs,
        cache_dir=cache_dir,
        on_done=(lambda n, _r: on_done(n, len(compile_jobs))) if on_done else None,
    )
    for i, j, threads in pending:
        res = results[j]
        if isinstance(res, CutuneError):
            rows[i] = CheckRow(configs[i], threads, None, None, f"compile: {_first_line(str(res))}")
            continue
        occ = occupancy_of(limits, res, threads, _dynamic_smem(spec, configs[i], size, limits))
        rows[i] = CheckRow(configs[i], threads, res, occ, None if occ.feasible else occ.message)
    done = [r for r in rows if r is not None]
    return CheckReport(ctx.kernel.name, arch, limits, space.size(), tuple(done), infeasible, drafted)


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
