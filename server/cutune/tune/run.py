"""Tuning one kernel end to end: open the backend, search, select, build and store the result."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import optuna

from cutune.cuda.extract import kernel_hash
from cutune.cuda.parse import parse_source
from cutune.errors import CutuneError
from cutune.gpu.backend import Backend, Check, DeviceInfo, Job
from cutune.gpu.clock import Clock
from cutune.gpu.finalists import first_finding, recheck, sanitizer_enabled
from cutune.gpu.replay import clock_of, measuring_name, replay_source
from cutune.gpu.sol import sol_floor_us
from cutune.limits import DeviceLimits, limits_for
from cutune.spec import KernelSpec
from cutune.spec.ragged import describe_checks, ragged_sizes
from cutune.template.model import Config
from cutune.tune.deadline import Deadline, PhasePlan
from cutune.tune.dispatch import DispatchPlan
from cutune.tune.held_out import HeldOut, check_held_out, per_file_params
from cutune.tune.options import TuneOptions
from cutune.tune.plan import plan_for, write_plan
from cutune.tune.result import SizeResult, TuneResult, result_path, write_result
from cutune.tune.search import ProgressFn, SearchOutcome, StopReason, progress_of, run_search
from cutune.tune.select import Selection, select, shortlist
from cutune.tune.space import Feasibility
from cutune.tune.study import open_study, param_importances, read_record, study_key

log = logging.getLogger(__name__)


def tune(
    job: Job,
    backend: Backend,
    options: TuneOptions,
    *,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    worker: str = "",
    opened: Callable[[str], None] | None = None,
    start: Sequence[Config] = (),
) -> TuneResult:
    """Search the job's space on the backend's device, verify the best against the original, store it.

    Other workers may join the study meanwhile (`cutune worker`, or `tune_on_devices`); `worker` names
    this one in the trials it measures, and `opened` is told the study's name once it is open. `start`
    are configurations the search measures first, after the original.

    A cancelled run keeps every finished trial in the study (the next run resumes it) and returns the
    original as its result, unstored: nothing unverified is ever reported as a speedup.

    `options.budget.seconds` bounds the whole run: the search keeps back what the later phases are expected
    to cost, and each later phase ends early at the deadline with what it has (tune/deadline.py). Time is
    read from the backend's clock (a replay's is virtual: a replayed run decides the same every time).
    """
    clock = clock_of(backend)
    deadline = Deadline.after(clock, options.budget.seconds)
    phases: dict[str, float] = {}
    outcome: SearchOutcome | None = None

    def phase(name: str) -> contextlib.AbstractContextManager[None]:
        if progress is not None and outcome is not None:
            progress(dataclasses.replace(progress_of(outcome.records, options.budget), phase=name))
        return _phase(phases, name, clock)

    with phase("open"):
        device = backend.open(job)
    try:
        limits = limits_of(device)
        check = Feasibility(job.space, job.spec, limits)
        key = study_key(job, device, backend)
        study = open_study(key, options.storage(), options.liveness)
        write_plan(study, plan_for(job, device, options))
        if opened is not None:
            opened(study.study_name)
        resumed = _resumed(study)
        plan = PhasePlan(options.selection, len(job.spec.sizes), _sanitizes(backend, options))
        with phase("search"):
            outcome = run_search(
                study,
                backend,
                check,
                check.listed(),
                options.budget,
                options.search,
                progress=progress,
                cancel=cancel,
                liveness=options.liveness,
                worker=worker,
                start=start,
                deadline=deadline,
                keep_back=lambda evaluation_s, finalists: plan.reserve(
                    options.budget.seconds or 0.0, evaluation_s, finalists
                ),
            )

        def sound_twin(config: Config) -> bool:  # a finalist's twin under the original's flags, as a trial
            if outcome is None or outcome.stop is StopReason.CANCELLED or (cancel is not None and cancel.is_set()):
                return False  # a cancelled run measures nothing more
            if deadline.left() < 2 * outcome.evaluation_s:
                log.info("twin %s: no time left to measure it (%.1f s)", config, deadline.left())
                return False
            why = check.violation(config)
            measured = backend.evaluate(config) if why is None else None
            if measured is not None and not measured.ok:
                why = f"{measured.failure}: {measured.detail[:200]}"
            if why is not None:
                log.info("twin %s: %s", config, why)
            elif measured is not None:
                log.info("twin %s: measured, %s", config, ", ".join(f"{t.median_us:.1f}" for t in measured.timings))
            return why is None

        candidates = shortlist(outcome, options.selection.top_k, per_file_params(job.space), sound_twin)
        # what is left of the budget decides how many finalists the selection can decide (the best first)
        fit = plan.finalists_within(deadline.left(), outcome.evaluation_s, len(candidates))
        log.debug("finalists (%d fit in the time left): %s", fit, "; ".join(map(str, candidates)))
        candidates = candidates[:fit]
        selection = None
        held_out: HeldOut | None = None
        rejected: list[Check] = []
        sanitized: list[Check] = []
        if outcome.stop is not StopReason.CANCELLED and candidates:
            with phase("re-check"):
                candidates, failed = recheck(
                    backend, candidates, options.selection.verify_seeds, job.seed, cancel=cancel
                )
            rejected += failed
        while outcome.stop is not StopReason.CANCELLED and candidates:
            after_s = plan.fixed_s(len(candidates))
            held_out_evaluations = plan.held_out(len(candidates))
            with phase("selection"):
                selection = select(
                    backend,
                    outcome.original.config,
                    candidates,
                    options.selection,
                    weights=job.spec.size_weights(),
                    per_file=per_file_params(job.space),
                    cancel=cancel,
                    deadline=deadline,
                    keep_s=_keep(held_out_evaluations, after_s),
                    confirming=plan.confirming(len(candidates)),
                )
            winners = () if selection is None else tuple(c for c in selection.chosen if c != outcome.original.config)
            if not winners or not sanitizer_enabled(options.sanitize):  # nothing to sanitize: no phase to time
                break
            with phase("sanitizer"):
                finding = first_finding(backend, winners)
            if finding is None:
                break
            sanitized.append(finding)  # a sanitizer finding: select again without that configuration
            candidates = tuple(c for c in candidates if c != finding.config)
            selection = None
        if selection is not None:
            with phase("held-out"):
                held_out = check_held_out(backend, job, selection, options.selection, cancel=cancel, deadline=deadline)
    finally:
        backend.close()
    cancelled = cancel is not None and cancel.is_set()
    if cancelled:  # a selection or held-out check cut short verified nothing: the original stands
        selection, held_out = None, None
    sizes = _sizes(job.spec, device, outcome, selection, held_out.plan if held_out is not None else None)
    launched = any(s.significant for s in sizes)  # what apply writes: a size that launches a tuned config
    replayed = replay_source(backend)
    result = TuneResult(
        kernel=key.kernel,
        source_path=job.source_path,
        source_hash=key.source_hash,
        study=key.name,
        device=device.name,
        arch=device.arch,
        # a replay reports the date its measurements were made: the same replay gives the same result
        date=replayed.date
        if replayed is not None
        else datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        original=outcome.original.config,
        # the single best stands only where some size launches a tuned config: else apply writes nothing
        best=selection.best.config
        if selection is not None and selection.best and launched
        else outcome.original.config,
        significant=launched,
        sizes=sizes,
        trials=outcome.measured,
        failures=_failures(outcome, [*rejected, *sanitized]),
        search_seconds=outcome.seconds,
        stop=StopReason.CANCELLED.value if cancelled else outcome.stop.value,
        sampler=outcome.sampler,
        importances=param_importances(outcome.records, job.space),
        kernel_hash=_kernel_hash(job),
        backend=measuring_name(backend),
        replayed=replayed,
        dispatch=held_out.plan if held_out is not None else None,
        single=selection.single if selection is not None else None,
        per_file=selection.per_file if selection is not None else Config.of({}),
        per_file_cost=selection.per_file_cost if selection is not None else 1.0,
        held_out=held_out.sizes if held_out is not None else (),
        held_out_note=held_out.note if held_out is not None else "",
        unchecked=held_out.unchecked if held_out is not None else (),
        resumed_trials=resumed,
        own_trials=outcome.own,
        search_estimate=_search_estimate(outcome),
        rounds=(options.selection.rounds, options.selection.confirm_rounds) if selection is not None else (0, 0),
        checks="; ".join((describe_checks(job.spec, ragged_sizes(job.spec)), *device.notes)),
        rejected={
            stage: dict(Counter(c.failure.value for c in checks if c.failure is not None))
            for stage, checks in (("re-check", rejected), ("sanitizer", sanitized))
            if checks
        },
        phases=phases,
        timing=job.timing.mode,
    )
    if not cancelled:
        write_result(result, stored_result_path(options, job))
    return result


def _failures(outcome: SearchOutcome, rejected: Sequence[Check]) -> dict[str, int]:
    """Failures by reason: the search's, and the finalists' that failed a re-check or the sanitizer."""
    counts = Counter(outcome.failures())
    counts.update(c.failure.value for c in rejected if c.failure is not None)
    return dict(counts)


def stored_result_path(options: TuneOptions, job: Job) -> Path:
    """Where `tune` stores the result of `job`."""
    return result_path(options.state_dir, job.source_path, job.template.kernel)


def _kernel_hash(job: Job) -> str:
    """The kernel's device-code hash, or "" when the template holds no such kernel to hash."""
    try:
        return kernel_hash(parse_source(job.template.source, job.source_path, rewrite=True), job.template.kernel)
    except CutuneError:
        return ""


@contextmanager
def _phase(phases: dict[str, float], name: str, clock: Clock) -> Iterator[None]:
    """Add the time of the block on `clock` to `phases[name]` (a phase may run more than once)."""
    start = clock.now()
    try:
        yield
    finally:
        phases[name] = phases.get(name, 0.0) + clock.now() - start


def _keep(evaluations: int, fixed_s: float) -> Callable[[float], float]:
    """Seconds to keep for `evaluations` more evaluations and `fixed_s` of other work."""
    return lambda evaluation_s: evaluations * evaluation_s + fixed_s


def _sanitizes(backend: Backend, options: TuneOptions) -> bool:
    """Whether compute-sanitizer will run on the winners (never on a replay: it runs no kernels)."""
    return replay_source(backend) is None and sanitizer_enabled(options.sanitize)


def limits_of(device: DeviceInfo) -> DeviceLimits:
    """The limits of the device a backend measures on (built-in ones where it reads none)."""
    if device.limits is not None:
        return device.limits
    return limits_for(device.arch).with_overrides(
        name=device.name,
        sm_count=device.sm_count,
        l2_bytes=device.l2_bytes,
    )


def _resumed(study: optuna.Study) -> int:
    """Configurations earlier runs of the study measured."""
    return sum(1 for t in study.get_trials(deepcopy=False) if (r := read_record(t)) is not None and r.measured)


def _search_estimate(outcome: SearchOutcome) -> float | None:
    """The search's best speedup (one measurement per configuration, not yet re-measured)."""
    ok = [r.objective for r in outcome.records if r.ok and r.objective]
    return 1.0 / min(ok) if ok else None


def _sizes(
    spec: KernelSpec,
    device: DeviceInfo,
    outcome: SearchOutcome,
    selection: Selection | None,
    plan: DispatchPlan | None,
) -> tuple[SizeResult, ...]:
    """Per spec size: what the dispatch `plan` launches there (what apply writes), against the original."""
    weights = spec.size_weights()
    sizes = []
    for i, o in enumerate(outcome.original.timings):
        config, original, tuned, single = outcome.original.config, o, o, None
        if selection is not None:
            config = plan.config_for(o.size) if plan is not None else selection.chosen[i]
            original = selection.original_timings[i]
            tuned = selection.timing(config, i)
            if selection.single is not None:
                single = selection.timing(selection.single, i)
        moved = spec.moved_bytes(o.size, config)
        floor = sol_floor_us(moved, device) if moved is not None else 0.0
        sizes.append(
            SizeResult(
                size=o.size,
                original=original,
                tuned=tuned,
                best_config=config,
                best_timing=tuned,
                significant=config != outcome.original.config,
                sol_floor_us=floor if floor > 0 else None,  # 0: no speed of light measured, or no bytes known
                weight=weights[i],
                single=single,
            )
        )
    return tuple(sizes)
