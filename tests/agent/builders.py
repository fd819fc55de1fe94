"""Measured-looking reports for analysis and apply tests: tuning results and compile-only checks, no GPU needed.

The numbers follow the design notes' H200 measurements of a merge-attention-states kernel: near the
floor at 818 MB of traffic, 40–60% of it at serving sizes, threads per block mattering little.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cutune.check import CheckReport, CheckRow
from cutune.gpu.backend import Timing
from cutune.gpu.occupancy import occupancy
from cutune.gpu.resources import ResourceUsage
from cutune.limits import limits_for
from cutune.project import KernelContext
from cutune.template.model import Config, Space, Value
from cutune.tune.dispatch import plan_dispatch
from cutune.tune.result import SizeResult, TuneResult

# (size, original µs, tuned µs, speed-of-light floor µs)
MERGE_SIZES = (
    ({"num_tokens": 512, "num_heads": 32}, 9.8, 9.7, 4.4),  # 16 MB: 45% of the floor
    ({"num_tokens": 1024, "num_heads": 32}, 15.1, 15.0, 8.1),  # 33 MB: 54%
    ({"num_tokens": 8192, "num_heads": 64}, 205.0, 204.0, 192.0),  # 818 MB: 94%
)


def timing(size: dict[str, int], median_us: float) -> Timing:
    """A timing with a 2% spread, as a quiet H200 gives."""
    return Timing(size, median_us, median_us * 0.99, median_us * 1.01, 50)


def tune_result(
    space: Space,
    *,
    sizes: Sequence[tuple[dict[str, int], float, float, float]] = MERGE_SIZES,
    significant: bool = False,
    importances: Mapping[str, float] | None = None,
    failures: Mapping[str, int] | None = None,
) -> TuneResult:
    """A tuning result of `space` at these sizes; the best is the default unless `significant`."""
    original = space.default()
    best = Config.of({**original, space.params[0].name: space.params[0].values[0]}) if significant else original
    results = tuple(
        SizeResult(
            size=size,
            original=timing(size, o),
            tuned=timing(size, t),
            best_config=best,
            best_timing=timing(size, t),
            significant=significant,
            sol_floor_us=floor,
        )
        for size, o, t, floor in sizes
    )
    return TuneResult(
        kernel="merge_attn_states_kernel",
        source_path="samples/merge_attn_states.cu",
        source_hash="0" * 16,
        study="merge_attn_states_kernel-test",
        device="NVIDIA H200",
        arch="sm_90",
        date="2026-11-21T12:00:00+00:00",
        original=original,
        best=best,
        significant=significant,
        sizes=results,
        trials=120,
        failures=dict(failures or {}),
        search_seconds=41.0,
        stop="budget",
        sampler="tpe",
        importances=dict(importances or {}),
    )


def check_report(
    kernel: str,
    rows: Sequence[tuple[Mapping[str, Value], int, int, int]],
    *,
    space_size: int = 64,
    arch: str = "sm_90",
) -> CheckReport:
    """A compile-only report from (config, threads, registers, spill bytes) rows; real occupancy rules."""
    limits = limits_for(arch)
    out = []
    for config, threads, registers, spills in rows:
        usage = ResourceUsage(
            function=f"_Z{len(kernel)}{kernel}",
            registers=registers,
            spill_store_bytes=spills,
            spill_load_bytes=spills,
        )
        occ = occupancy(limits, threads, registers, 0)
        out.append(CheckRow(Config.of(config), threads, usage, occ, None if occ.feasible else occ.message))
    return CheckReport(kernel, arch, limits, space_size, tuple(out), skipped_infeasible=0, spec_drafted=False)


def dispatch_result(ctx: KernelContext, per_size: Sequence[Mapping[str, Value]]) -> TuneResult:
    """A tuning result launching `per_size[i]` (changes to the combined space's defaults) at spec size i."""
    assert ctx.spec is not None
    original = ctx.space.default()
    configs = [Config.of({**original, **c}) for c in per_size]
    sizes = ctx.spec.sizes
    results = tuple(
        SizeResult(
            size=dict(s),
            original=Timing(dict(s), 10.0, 9.9, 10.1, 30),
            tuned=Timing(dict(s), 8.0 if c != original else 10.0, 7.9, 8.1, 30),
            best_config=c,
            best_timing=Timing(dict(s), 8.0, 7.9, 8.1, 30),
            significant=c != original,
        )
        for s, c in zip(sizes, configs, strict=True)
    )
    return TuneResult(
        kernel=ctx.kernel.name,
        source_path=str(ctx.path),
        source_hash="0" * 16,
        study="test",
        device="NVIDIA H200",
        arch="sm_90",
        date="2026-11-22T12:00:00+00:00",
        original=original,
        best=configs[-1],
        significant=True,
        sizes=results,
        trials=10,
        dispatch=plan_dispatch(sizes, configs, original),
    )
