"""Tuning one kernel end to end: open the backend, search, select, build and store the result."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Sequence
from pathlib import Path

from cutune.cuda.extract import kernel_hash
from cutune.cuda.parse import parse_source
from cutune.errors import CutuneError
from cutune.gpu.backend import Backend, DeviceInfo, Job, Timing
from cutune.gpu.limits import DeviceLimits, limits_for
from cutune.gpu.sol import sol_floor_us
from cutune.template.model import Config
from cutune.template.spec import KernelSpec
from cutune.tune.options import TuneOptions
from cutune.tune.result import SizeResult, TuneResult, result_path, write_result
from cutune.tune.search import ProgressFn, SearchOutcome, StopReason, run_search
from cutune.tune.select import Selection, select, shortlist
from cutune.tune.space import Feasibility, feasible_configs
from cutune.tune.study import open_study, param_importances, study_key


def tune(
    job: Job,
    backend: Backend,
    options: TuneOptions,
    *,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> TuneResult:
    """Search the job's space on the backend's device, verify the best against the original, store it.

    A cancelled run keeps every finished trial in the study (the next run resumes it) and returns the
    original as its result, unstored: nothing unverified is ever reported as a speedup.
    """
    device = backend.open(job)
    try:
        limits = _limits(device)
        check = Feasibility(job.space, job.spec, limits)
        key = study_key(job, device)
        study = open_study(key, options.storage())
        outcome = run_search(
            study,
            backend,
            check,
            feasible_configs(job.space, job.spec, limits),
            options.budget,
            options.search,
            progress=progress,
            cancel=cancel,
        )
        candidates = shortlist(outcome, options.selection.top_k)
        selection = None
        if outcome.stop is not StopReason.CANCELLED and candidates:
            selection = select(backend, outcome.original.config, candidates, options.selection, cancel=cancel)
    finally:
        backend.close()
    cancelled = cancel is not None and cancel.is_set()
    result = TuneResult(
        kernel=key.kernel,
        source_path=job.source_path,
        source_hash=key.source_hash,
        study=key.name,
        device=device.name,
        arch=device.arch,
        date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        original=outcome.original.config,
        best=selection.best.config if selection is not None and selection.best else outcome.original.config,
        significant=selection is not None and selection.best is not None,
        sizes=_sizes(job.spec, device, outcome, selection),
        trials=outcome.measured,
        failures=outcome.failures(),
        search_seconds=outcome.seconds,
        stop=StopReason.CANCELLED.value if cancelled else outcome.stop.value,
        sampler=outcome.sampler,
        importances=param_importances(outcome.records, job.space),
        kernel_hash=_kernel_hash(job),
    )
    if not cancelled:
        write_result(result, stored_result_path(options, job))
    return result


def stored_result_path(options: TuneOptions, job: Job) -> Path:
    """Where `tune` stores the result of `job`."""
    return result_path(options.state_dir, job.source_path, job.template.kernel)


def _kernel_hash(job: Job) -> str:
    """The kernel's device-code hash, or "" when the template holds no such kernel to hash."""
    try:
        return kernel_hash(parse_source(job.template.source, job.source_path), job.template.kernel)
    except CutuneError:
        return ""


def _limits(device: DeviceInfo) -> DeviceLimits:
    if device.limits is not None:
        return device.limits
    return limits_for(device.arch).with_overrides(
        name=device.name,
        sm_count=device.sm_count,
        l2_bytes=device.l2_bytes,
    )


def _sizes(
    spec: KernelSpec, device: DeviceInfo, outcome: SearchOutcome, selection: Selection | None
) -> tuple[SizeResult, ...]:
    original: Sequence[Timing] = outcome.original.timings
    tuned = original
    best_config: Config = outcome.original.config
    if selection is not None:
        original = tuned = selection.original_timings
        if selection.best is not None:
            tuned, best_config = selection.best.timings, selection.best.config
    sizes = []
    for i, (o, t) in enumerate(zip(original, tuned, strict=True)):
        here = selection.best_for_size(i) if selection is not None else None
        floor = sol_floor_us(spec.moved_bytes(o.size, best_config), device)
        sizes.append(
            SizeResult(
                size=o.size,
                original=o,
                tuned=t,
                best_config=here.config if here else outcome.original.config,
                best_timing=here.timings[i] if here else o,
                significant=here is not None,
                sol_floor_us=floor if floor > 0 else None,  # 0: the device's speed of light was not measured
            )
        )
    return tuple(sizes)
