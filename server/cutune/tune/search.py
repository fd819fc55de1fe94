"""The search loop: Optuna proposes, infeasible points are turned away unmeasured, the rest are timed."""

from __future__ import annotations

import enum
import random
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from cutune.errors import StudyError
from cutune.gpu.backend import Backend, Failure, Measurement, Timing
from cutune.template.model import Config
from cutune.tune.options import Budget, SearchOptions
from cutune.tune.samplers import GRID, SAMPLERS, resolve_sampler
from cutune.tune.space import Feasibility, distributions
from cutune.tune.study import REPEAT_OF, SEARCH_SECONDS, TrialRecord, read_record, record_attrs

# consecutive proposals that measure nothing new (repeats, infeasible points) before the sampler is
# taken to have converged; proposals cost no GPU time, so this can be generous
_MAX_IDLE = 200


class StopReason(enum.Enum):
    """Why a search ended."""

    BUDGET = "budget"  # the trial budget is spent
    TIME = "time"  # the time budget is spent
    EXHAUSTED = "exhausted"  # every feasible configuration has been measured
    CONVERGED = "converged"  # the sampler kept proposing configurations already known or infeasible
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class Progress:
    """Where a search stands, after each measured trial."""

    done: int  # configurations measured in the study, the original included
    budget: int
    failures: int  # measured configurations that failed (compile, fault, wrong, timeout, ...)
    best: float | None  # the best objective so far: time relative to the original, < 1 is faster
    best_config: Config | None


ProgressFn = Callable[[Progress], None]


@dataclass(frozen=True)
class SearchOutcome:
    """Every configuration a study has tried, and how the search ended."""

    records: tuple[TrialRecord, ...]  # one per configuration, in trial order
    original: TrialRecord
    sampler: str
    stop: StopReason
    seconds: float  # search wall time over all runs of the study

    @property
    def measured(self) -> int:
        """Configurations that reached the backend."""
        return sum(r.measured for r in self.records)

    def failures(self) -> dict[str, int]:
        """How many configurations failed, by reason (infeasible ones included)."""
        return dict(Counter(r.failure.value for r in self.records if r.failure is not None))


def objective(timings: Sequence[Timing], original: Sequence[Timing]) -> float:
    """Geometric mean over problem sizes of median time / the original's median time (1.0 = original)."""
    return statistics.geometric_mean(t.median_us / o.median_us for t, o in zip(timings, original, strict=True))


def run_search(
    study: optuna.Study,
    backend: Backend,
    check: Feasibility,
    feasible: Sequence[Config] | None,
    budget: Budget,
    options: SearchOptions,
    *,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
) -> SearchOutcome:
    """Measure the original (first), then what the sampler proposes, until budget, time or cancel."""
    return _Search(study, backend, check, budget, progress, cancel).run(feasible, options)


class _Search:
    def __init__(
        self,
        study: optuna.Study,
        backend: Backend,
        check: Feasibility,
        budget: Budget,
        progress: ProgressFn | None,
        cancel: threading.Event | None,
    ) -> None:
        self.study = study
        self.backend = backend
        self.check = check
        self.budget = budget
        self.progress = progress
        self.cancel = cancel
        self.default = check.space.default()
        self.distributions = distributions(check.space)
        self.known: dict[Config, TrialRecord] = {}
        for trial in study.get_trials(deepcopy=False):
            record = read_record(trial)
            if record is not None:
                self.known.setdefault(record.config, record)
        self.original = self.known.get(self.default)
        if self.original is not None and not self.original.ok:
            del self.known[self.default]  # the original is measured again until it succeeds
            self.original = None
        self.prior_seconds = float(study.user_attrs.get(SEARCH_SECONDS, 0.0))
        self.started = time.monotonic()

    @property
    def measured(self) -> int:
        return sum(r.measured for r in self.known.values())

    @property
    def seconds(self) -> float:
        return self.prior_seconds + time.monotonic() - self.started

    def run(self, feasible: Sequence[Config] | None, options: SearchOptions) -> SearchOutcome:
        why = self.check.violation(self.default)
        if why is not None:
            raise StudyError(f"the original configuration ({self.default}) is infeasible: {why}")
        pending = None if feasible is None else [c for c in feasible if c not in self.known]
        sampler = resolve_sampler(
            options.sampler,
            pending=None if pending is None else len(pending),
            budget_left=self.budget.trials - self.measured,
        )
        # offset by the trials so far, so that a resumed run does not replay the first run's draws
        self.study.sampler = SAMPLERS[sampler](options.seed + len(self.study.trials))
        queue: list[Config] = []
        if sampler == GRID and pending is not None:
            queue = pending
            random.Random(options.seed).shuffle(queue)  # a cut-short grid is then an unbiased sample
        if self.original is None:
            queue = [self.default, *(c for c in queue if c != self.default)]
        if queue:
            self.backend.prefetch(queue)
        feasible_count = None if feasible is None else len(feasible)
        idle = 0
        while (stop := self._stop(queue, sampler, feasible_count, idle)) is None:
            if queue:
                self.study.enqueue_trial(dict(queue.pop(0)))
            trial = self.study.ask(self.distributions)
            idle = 0 if self._step(trial, Config.of(trial.params)) else idle + 1
        return SearchOutcome(
            records=tuple(sorted(self.known.values(), key=lambda r: r.number)),
            original=self._original(),
            sampler=sampler,
            stop=stop,
            seconds=self.seconds,
        )

    def _original(self) -> TrialRecord:
        assert self.original is not None  # measured first, or raised
        return self.original

    def _stop(self, queue: list[Config], sampler: str, feasible_count: int | None, idle: int) -> StopReason | None:
        if self.original is None:
            return None  # nothing can be compared without the original: it is always measured
        if self.cancel is not None and self.cancel.is_set():
            return StopReason.CANCELLED
        if self.measured >= self.budget.trials:
            return StopReason.BUDGET
        if self.budget.seconds is not None and self.seconds >= self.budget.seconds:
            return StopReason.TIME
        if (sampler == GRID and not queue) or (feasible_count is not None and self.measured >= feasible_count):
            return StopReason.EXHAUSTED
        if idle >= _MAX_IDLE:
            return StopReason.CONVERGED
        return None

    def _step(self, trial: optuna.Trial, config: Config) -> bool:
        """Finish one proposed trial; True when it measured a new configuration."""
        earlier = self.known.get(config)
        if earlier is not None:
            trial.set_user_attr(REPEAT_OF, earlier.number)
            self._tell(trial, earlier)
            return False
        why = self.check.violation(config)
        if why is not None:
            self._record(
                trial, TrialRecord(trial.number, config, None, failure=Failure.INFEASIBLE, detail=why, measured=False)
            )
            return False
        try:
            measurement = self.backend.evaluate(config)
        except BaseException:
            # Ctrl-C or a backend bug: a FAIL without a failure reason, measured again on resume
            self.study.tell(trial, state=TrialState.FAIL)
            raise
        record = self._record(trial, self._measured(trial.number, config, measurement))
        if config == self.default:
            if record.failure is not None:
                raise StudyError(f"the original configuration failed ({record.failure.value}): {record.detail}")
            self.original = record
        self.study.set_user_attr(SEARCH_SECONDS, self.seconds)
        if self.progress is not None:
            self.progress(self._progress())
        return True

    def _measured(self, number: int, config: Config, m: Measurement) -> TrialRecord:
        if not m.ok:
            # a backend that returns neither timings nor a reason broke its contract
            return TrialRecord(
                number,
                config,
                None,
                compile=m.compile,
                failure=m.failure or Failure.CRASH,
                detail=m.detail or "no timings",
            )
        original = m.timings if config == self.default else self._original().timings
        return TrialRecord(number, config, objective(m.timings, original), timings=m.timings, compile=m.compile)

    def _record(self, trial: optuna.Trial, record: TrialRecord) -> TrialRecord:
        for key, value in record_attrs(record).items():
            trial.set_user_attr(key, value)
        self._tell(trial, record)
        self.known[record.config] = record
        return record

    def _tell(self, trial: optuna.Trial, record: TrialRecord) -> None:
        if not record.measured:
            # Constrained TPE ranks trials with a positive constraint below every feasible one, so the
            # sampler learns to avoid the region; PRUNED (not COMPLETE) keeps a made-up objective out
            # of the study's values.
            trial.set_constraint("feasible", 1.0)
            self.study.tell(trial, state=TrialState.PRUNED)
        elif record.ok:
            self.study.tell(trial, record.objective)
        else:
            self.study.tell(trial, state=TrialState.FAIL)

    def _progress(self) -> Progress:
        ok = [r for r in self.known.values() if r.ok]
        best = min(ok, key=lambda r: r.objective or 0.0, default=None)
        failed = sum(r.measured and not r.ok for r in self.known.values())
        return Progress(
            done=self.measured,
            budget=self.budget.trials,
            failures=failed,
            best=None if best is None else best.objective,
            best_config=None if best is None else best.config,
        )
