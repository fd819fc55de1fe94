"""Compile-only feasibility: every configuration (or a sample) through the compiler tune uses, with occupancy
on a target.

Each configuration is built (`gpu/build.py`) and compiled (`gpu/compile.py`) exactly as tune's backend
builds and compiles it, with the same `auto` rule (NVRTC, else nvcc, saying why): a configuration
feasible here compiles in `tune` with the same compiler, unit and options.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cutune.errors import CutuneError
from cutune.gpu.build import BuildKey, build_key, kernel_request
from cutune.gpu.compile import check_choice, compile_kernel, first_error, run_parallel
from cutune.gpu.compile_cache import CompileCache
from cutune.gpu.compiler import Build, Compiled
from cutune.gpu.occupancy import Occupancy, occupancy_of
from cutune.gpu.resources import ResourceUsage
from cutune.limits import DeviceLimits, limits_for
from cutune.project import KernelContext
from cutune.spec import KernelSpec
from cutune.template.model import Config
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
    build: Build | None = None  # how it was compiled: what tune's backend compiles for this configuration

    @property
    def feasible(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class CheckReport:
    """The outcome of a compile-only check of one kernel."""

    kernel: str
    arch: str
    limits: DeviceLimits
    space_size: int  # points a variant's own parameters take only where it runs (Feasibility.size)
    rows: tuple[CheckRow, ...]
    skipped_infeasible: int  # sampled points that break a constraint or limit before compiling (not listed)
    spec_drafted: bool  # True when no spec existed and a drafted one was used
    compiler: str = "auto"  # the choice asked for: auto, nvrtc or nvcc
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
    compiler: str = "auto",
) -> CheckReport:
    """Compile the default and up to `limit - 1` sampled configurations for `arch` and rate each.

    `compiler` is auto (NVRTC, else nvcc where NVRTC cannot compile, as tune does), nvrtc or nvcc."""
    check_choice(compiler)
    limits = limits_for(arch)
    if ctx.spec_error is not None:  # a broken spec is the user's to fix; a drafted one would hide it
        raise ctx.spec_error
    spec, drafted = (ctx.spec, False) if ctx.spec is not None else (ctx.drafted_spec(), True)
    space = ctx.space
    feasibility = Feasibility(space, spec, limits)
    configs, infeasible = _sample(feasibility, limit, seed, checked=bool(spec.sizes))
    rows: list[CheckRow | None] = [None] * len(configs)
    size = spec.sizes[0] if spec.sizes else {}
    keys: dict[int, tuple[BuildKey, str]] = {}  # row → (build key, its expression)
    for i, config in enumerate(configs):
        try:
            key, (expression,) = build_key(ctx.template_model, ctx.kernel.name, spec, space, config, [size])
            keys[i] = (key, expression)
        except CutuneError as e:
            rows[i] = CheckRow(config, None, None, None, str(e))
    distinct = list(dict.fromkeys(key for key, _ in keys.values()))
    cache = CompileCache(cache_dir) if cache_dir else None

    def task(key: BuildKey) -> Callable[[], Compiled]:
        request = kernel_request(ctx.template_model, ctx.kernel.name, spec, key)
        return lambda: compile_kernel(request, key.target(arch), compiler, cache)

    done = 0

    def progress(_index: int, _result: object) -> None:
        nonlocal done
        done += 1
        if on_done:
            on_done(done, len(distinct))

    compiled = run_parallel([task(k) for k in distinct], workers=jobs, on_done=progress)
    results = dict(zip(distinct, compiled, strict=True))
    why = next((r.fallback for r in results.values() if isinstance(r, Compiled) and r.fallback), "")
    for i, (key, expression) in keys.items():
        res = results[key]
        try:  # the launch is evaluated apart from compiling: a bad grid leaves what compiled reported
            threads, smem = _launch(spec, configs[i], size, limits)
        except CutuneError as e:
            threads, smem, launch_problem = None, 0, str(e)
        else:
            launch_problem = ""
        if isinstance(res, CutuneError):
            rows[i] = CheckRow(configs[i], threads, None, None, f"compile: {first_error(res)}")
            continue
        kernel = res.kernel(expression)
        if threads is None:
            rows[i] = CheckRow(configs[i], None, kernel.resources, None, launch_problem, res.compiler, kernel.build)
            continue
        occ = occupancy_of(limits, kernel.resources, threads, smem)
        problem = None if occ.feasible else occ.message
        rows[i] = CheckRow(configs[i], threads, kernel.resources, occ, problem, res.compiler, kernel.build)
    listed = tuple(r for r in rows if r is not None)
    return CheckReport(ctx.kernel.name, arch, limits, feasibility.size(), listed, infeasible, drafted, compiler, why)


def _sample(feasibility: Feasibility, limit: int, seed: int, checked: bool) -> tuple[list[Config], int]:
    """The default first, then the points (all, or a seeded uniform sample; a variant's own parameters only where it
    runs) that are feasible where `checked` (the spec has sizes to check them at); and how many were not."""
    default = feasibility.space.default()
    out = [default]
    rejected = 0

    def take(c: Config) -> None:
        nonlocal rejected
        if checked and feasibility.violation(c) is not None:
            rejected += 1
        else:
            out.append(c)

    sizes = feasibility.group_sizes()
    if sum(sizes) <= limit:
        for c in feasibility.points():
            if c != default:
                take(c)
        return out, rejected
    rng = random.Random(seed)
    names = [p.name for p in feasibility.space.params]
    seen = {default}
    for _ in range(limit * 50):  # bounded: a space that is mostly infeasible stops early
        if len(out) >= limit:
            break
        group = rng.choices(feasibility.groups, weights=sizes)[0]  # each point of the groups equally likely
        c = Config.of({name: rng.choice(values) for name, values in zip(names, group, strict=True)})
        if c not in seen:
            seen.add(c)
            take(c)
    return out, rejected


def _names(config: Config, size: dict[str, int], limits: DeviceLimits) -> dict[str, int | float | bool]:
    return {**limits.as_names(), **size, **{k: v for k, v in config.items() if not isinstance(v, str)}}


def _launch(spec: KernelSpec, config: Config, size: dict[str, int], limits: DeviceLimits) -> tuple[int, int]:
    """Threads per block and dynamic shared memory of the launch; raises CutuneError where it does not evaluate."""
    _, block, smem = spec.launch(_names(config, size, limits))
    return block[0] * block[1] * block[2], smem
