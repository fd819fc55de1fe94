"""The search loop: Optuna proposes, infeasible points are turned away unmeasured, the rest are timed.

Several workers (one per GPU, on one host or many) can run this loop on one study at once. Each
measures only what it has claimed, and a claim is a trial: after `ask()` has written the trial's
parameters, the worker reads the study and gives the trial up (FAIL, `yielded_to`) when it sees
another live claim of the same configuration, or more live claims and measured configurations than
the budget allows. Writes and reads are ordered in every Optuna storage (the journal is one
append-only log; RDB writes commit before they return), and each worker reads only after its own
write, so of two workers claiming at once at least one sees the other and yields: a configuration is
never measured twice and the budget never overrun. Both may yield; then the configuration is
proposed again later (a configuration the search proposed itself goes back in its queue). A claim
whose worker dies is failed after the grace period and retried (cutune.tune.liveness); a worker that
can claim nothing now (the budget or the space is all claimed) waits for the others' claims to finish or
die, so the study's search ends complete.
"""

from __future__ import annotations

import enum
import functools
import logging
import random
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.exceptions import UpdateFinishedTrialError
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from cutune.errors import StudyError
from cutune.gpu.backend import Backend, Failure, Measurement, Timing
from cutune.gpu.replay import clock_of
from cutune.template.model import Binding, Config, Value
from cutune.template.recipes.index_bits import NAME as INDEX_BITS
from cutune.template.recipes.index_bits import narrowed
from cutune.template.variants.combine import VARIANT
from cutune.tune.deadline import Deadline
from cutune.tune.liveness import fail_stale_trials, heartbeat, worker_name
from cutune.tune.options import Budget, Liveness, SearchOptions
from cutune.tune.samplers import GRID, SAMPLERS, resolve_sampler
from cutune.tune.space import Feasibility, distributions, neighbours
from cutune.tune.study import (
    QUEUED,
    REPEAT_OF,
    SEARCH_SECONDS,
    WORKER,
    YIELDED_TO,
    TrialRecord,
    read_record,
    record_attrs,
)

# consecutive proposals that measure nothing new (repeats, infeasible points) before the sampler is
# taken to have converged; proposals cost no GPU time, so this can be generous
_MAX_IDLE = 200
log = logging.getLogger(__name__)


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
    phase: str = "search"  # the run's phase: search, re-check, selection, sanitizer, held-out


ProgressFn = Callable[[Progress], None]
# seconds to keep back from the deadline for after the search, given one evaluation's cost and the finalists so far
KeepBack = Callable[[float, int], float]


@dataclass(frozen=True)
class SearchOutcome:
    """Every configuration a study has tried, and how the search ended."""

    records: tuple[TrialRecord, ...]  # one per configuration, in trial order
    original: TrialRecord
    sampler: str
    stop: StopReason
    seconds: float  # search wall time over all runs of the study
    evaluation_s: float = 0.0  # what one evaluation cost in this run, compiling aside (median)
    own: int = 0  # configurations this search measured (the rest: earlier runs, or workers at the same time)

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
    liveness: Liveness | None = None,
    worker: str = "",
    queue_start: float = 0.0,
    start: Sequence[Config] = (),
    deadline: Deadline | None = None,
    keep_back: KeepBack | None = None,
) -> SearchOutcome:
    """Measure the original (first), then what the sampler proposes, until budget, time or cancel.

    Other workers may search the same study at once (see the module's docstring): `worker` names this
    one in the trials it measures, and `queue_start` (0 ≤ x < 1) is where in the shuffled grid it
    starts, so that workers do not all reach for the same configurations. `start` are configurations
    measured right after the original (the feasible ones), e.g. the winners of earlier searches.
    The search ends when one more evaluation would leave less than `keep_back` before `deadline`
    (default: the budget's seconds from now, nothing kept back); time is read from the backend's clock.
    """
    deadline = deadline or Deadline.after(clock_of(backend), budget.seconds)
    search = _Search(study, backend, check, budget, progress, cancel, liveness or Liveness(), worker, deadline)
    search.keep_back = keep_back or search.keep_back
    return search.run(feasible, options, queue_start, start)


def variant_seeds(check: Feasibility) -> list[Config]:
    """Each structural variant at its parameters' defaults, or at their `try_first` values where they have them
    (a variant whose defaults run the kernel as written would otherwise spend its one seed on the original's code);
    then the original and each variant with 32-bit indices (INDEX_BITS) where the kernel has them, and with every size
    specialised (the SPECIALIZE_* parameters: a row held in registers, loops unrolled over a known length) where it
    has those; where feasible. Measured right after the original, so that the sampler has seen every variant, both
    index widths and compile-time sizes before it learns which to favour (a variant whose best form needs its sizes
    compiled in would otherwise look no better)."""
    default = check.space.default()
    param = next((p for p in check.space.params if p.name == VARIANT), None)
    values = param.values if param else ()
    pins = check.pinned(VARIANT) if param else {}
    variants = [_first_try(check, pins, Config.of({**default, VARIANT: v})) for v in values if v != default[VARIANT]]
    indices = any(p.name == INDEX_BITS for p in check.space.params)
    narrow = [narrowed(c) for c in (default, *variants)] if indices else []
    sizes = [p.name for p in check.space.params if p.binding is Binding.SPECIALIZE and True in p.values]
    specialised = [_specialised(check, c, sizes) for c in (default, *variants)] if sizes else []
    return [c for c in dict.fromkeys((*variants, *narrow, *specialised)) if check.violation(c) is None]


def _first_try(
    check: Feasibility, pins: Mapping[Value, frozenset[str]], config: Config, kept: frozenset[str] = frozenset()
) -> Config:
    """`config` (a variant at its defaults) with each of the variant's own parameters but `kept` at its `try_first`
    value where that stays feasible, one after another as `_specialised` does, again until none changes: a first
    value may be feasible only beside another's (fewer threads a row than a warp, where a block holds several rows)
    (only parameters the original holds at their defaults, `pins` per VARIANT value, are the variant's own)."""
    own = _own(check, pins, config[VARIANT]) - kept
    firsts = {p.name: p.try_first for p in check.space.params if p.name in own and p.try_first is not None}
    changed = True
    while changed:
        changed = False
        for name, value in firsts.items():
            tried = Config.of({**config, name: value})
            if tried != config and check.violation(tried) is None:
                config, changed = tried, True
    return config


def _own(check: Feasibility, pins: Mapping[Value, frozenset[str]], variant: Value) -> frozenset[str]:
    """The parameters of structural variant `variant`'s own: those the original holds at their defaults and it frees."""
    return pins.get(check.space.default()[VARIANT], frozenset()) - pins.get(variant, frozenset())


def variant_moves(check: Feasibility, config: Config) -> list[Config]:
    """`config` carried over to each other structural variant that shares one of its variant's own parameters (a
    chained variant and its parent, e.g. row_reduce and row_reduce_block_items): the shared ones as `config` has them,
    that variant's others at their `try_first` values, every parameter it does not run at its default; where feasible.
    A step of VARIANT alone (`neighbours`) would try the chained variant at its own defaults, which run it as its
    parent: the search would not see what the chained change adds to the parent's best."""
    param = next((p for p in check.space.params if p.name == VARIANT), None)
    if param is None:
        return []
    pins = check.pinned(VARIANT)
    default = check.space.default()
    mine = _own(check, pins, config[VARIANT])
    moves = []
    for value in param.values:
        theirs = _own(check, pins, value)
        if value in (config[VARIANT], default[VARIANT]) or not mine & theirs:
            continue
        moved = Config.of({**config, VARIANT: value, **{n: default[n] for n in pins.get(value, frozenset())}})
        moved = _first_try(check, pins, moved, kept=mine & theirs)
        if check.violation(moved) is None:
            moves.append(moved)
    return moves


def _best_per_variant(ranked: Sequence[TrialRecord]) -> list[TrialRecord]:
    """The first of `ranked` (best first) of each VARIANT value, in that order (only the best where there is none)."""
    firsts: dict[Value | None, TrialRecord] = {}
    for record in ranked:
        firsts.setdefault(record.config.get(VARIANT), record)
    return list(firsts.values())


def _at_size(i: int, record: TrialRecord) -> tuple[float, int]:
    """A record's median at size `i` (then its number, for a stable order)."""
    return record.timings[i].median_us, record.number


def _specialised(check: Feasibility, config: Config, sizes: Sequence[str]) -> Config:
    """`config` with each of the `sizes` switches on where it stays feasible (a size of 0 at some problem size, say,
    cannot be compiled in)."""
    for name in sizes:
        on = Config.of({**config, name: True})
        if check.violation(on) is None:
            config = on
    return config


@dataclass
class _Probe:
    """The search's rounds around its best configuration so far. A sampler given a few dozen trials over a space of
    thousands of points (a structural variant's own parameters, times index widths, compile flags) models it
    poorly; one step along each parameter from the best point is what a person tuning by hand tries next. Each
    round is followed by as many of the sampler's proposals (`owed`), so other variants keep their chance."""

    rng: random.Random
    done: set[Config] = field(default_factory=set)  # best configurations whose neighbours were proposed
    owed: int = 0  # the sampler's proposals still due before the next round
    rounds: int = 0  # rounds proposed so far: the odd ones go to the other variants' bests first


class _Proposer(BaseSampler):
    """The search's sampler, except when the search proposes a configuration itself (grid, original); a variant's
    own parameters, where the sampler picked another variant, are set to their defaults (`pinned`, per VARIANT
    value) instead of proposing a point the constraints turn away."""

    def __init__(self, inner: BaseSampler, pinned: Mapping[Value, frozenset[str]], default: Config) -> None:
        self.inner = inner
        self.forced: Config | None = None
        self.pinned = pinned
        self.default = default

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        if self.forced is not None:
            return {}
        return self.inner.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if self.forced is not None:
            return {}
        params = self.inner.sample_relative(study, trial, search_space)
        held = self._held(params.get(VARIANT, trial.params.get(VARIANT)))
        return {k: self.default[k] if k in held else v for k, v in params.items()}

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        if self.forced is not None:
            return self.forced[param_name]
        if param_name in self._held(trial.params.get(VARIANT)):  # VARIANT is asked for first
            return self.default[param_name]
        return self.inner.sample_independent(study, trial, param_name, param_distribution)

    def _held(self, variant: object) -> frozenset[str]:
        """The parameters pinned to their defaults where VARIANT is `variant` (None: not sampled yet)."""
        return self.pinned.get(variant, frozenset()) if isinstance(variant, (int, str)) else frozenset()

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.inner.before_trial(study, trial)

    def after_trial(
        self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
    ) -> None:
        self.inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()


class _Search:
    def __init__(
        self,
        study: optuna.Study,
        backend: Backend,
        check: Feasibility,
        budget: Budget,
        progress: ProgressFn | None,
        cancel: threading.Event | None,
        liveness: Liveness,
        worker: str,
        deadline: Deadline,
    ) -> None:
        self.study = study
        self.backend = backend
        self.check = check
        self.budget = budget
        self.progress = progress
        self.cancel = cancel
        self.liveness = liveness
        self.worker = worker or worker_name()
        self.default = check.space.default()
        # VARIANT first: the proposer reads it to pin the other variants' parameters (`ask` samples in this order)
        ordered = sorted(distributions(check.space).items(), key=lambda item: item[0] != VARIANT)
        self.distributions: dict[str, BaseDistribution] = dict(ordered)
        self.known: dict[Config, TrialRecord] = {}
        self.claims: dict[Config, int] = {}  # configurations other workers are on: config → trial number
        self.waiting = 0  # trials queued for a retry, which the next ask() of any worker takes
        self.original: TrialRecord | None = None
        self.baseline: tuple[Timing, ...] | None = None  # the original's timings on this worker's device
        self.stale_checked = 0.0
        self._refresh()
        self.prior_seconds = float(study.user_attrs.get(SEARCH_SECONDS, 0.0))
        self.clock = deadline.clock
        self.started = self.clock.now()
        self.deadline = deadline
        self.keep_back: KeepBack = lambda _s, _n: 0.0
        self.evaluation_s: list[float] = []  # this run's evaluations: clock time less compile time
        self.own = 0  # configurations this search measured
        self.step_s: list[float] = []  # this run's measured trials, start to end

    def _refresh(self, mine: int | None = None) -> bool:
        """Read what the study holds now: finished records, other workers' live claims, queued retries.

        Returns whether trial `mine` was queued (a retry, taken from the WAITING trials) rather than new.
        """
        if time.monotonic() - self.stale_checked > self.liveness.heartbeat_s:
            fail_stale_trials(self.study, self.liveness)  # dead workers' claims go back to the queue
            self.stale_checked = time.monotonic()
        known: dict[Config, TrialRecord] = {}
        claims: dict[Config, int] = {}
        waiting = 0
        queued = False
        for trial in self.study.get_trials(deepcopy=False):
            if trial.number == mine:
                queued = QUEUED in trial.system_attrs
            elif trial.state == TrialState.WAITING:
                waiting += 1
            elif trial.state == TrialState.RUNNING:
                if len(trial.params) == len(self.distributions):
                    claims.setdefault(Config.of(trial.params), trial.number)
            else:
                record = read_record(trial)
                if record is not None:
                    known.setdefault(record.config, record)
        self.known, self.claims, self.waiting = known, claims, waiting
        self.original = self.known.get(self.default)
        if self.original is not None and not self.original.ok:
            del self.known[self.default]  # the original is measured again until it succeeds
            self.original = None
        return queued

    @property
    def measured(self) -> int:
        return sum(r.measured for r in self.known.values())

    @property
    def seconds(self) -> float:
        return self.prior_seconds + self.clock.now() - self.started

    def run(
        self,
        feasible: Sequence[Config] | None,
        options: SearchOptions,
        queue_start: float,
        start_with: Sequence[Config],
    ) -> SearchOutcome:
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
        proposer = _Proposer(
            SAMPLERS[sampler](options.seed + len(self.study.trials)), self.check.pinned(VARIANT), self.default
        )
        self.study.sampler = proposer
        queue: list[Config] = []
        if sampler == GRID and pending is not None:
            queue = pending
            random.Random(options.seed).shuffle(queue)  # a cut-short grid is then an unbiased sample
            start = int(queue_start * len(queue)) % max(len(queue), 1)
            queue = queue[start:] + queue[:start]
        else:
            queue = [c for c in variant_seeds(self.check) if c not in self.known]
        first = [c for c in dict.fromkeys(start_with) if c not in self.known and self.check.violation(c) is None]
        queue = [*first, *(c for c in queue if c not in first)]
        if self.original is None:
            queue = [self.default, *(c for c in queue if c != self.default)]
        if queue:
            self.backend.prefetch(queue)
        feasible_count = None if feasible is None else len(feasible)
        idle = 0
        probe = (
            _Probe(random.Random(options.seed + len(self.study.trials))) if options.probe and sampler != GRID else None
        )
        while (stop := self._stop(queue, sampler, feasible_count, idle)) is None:
            if not self._can_claim(queue, sampler, feasible_count):
                self._wait()
                continue
            if not queue and probe is not None:
                queue += self._probes(probe)
            proposer.forced = queue[0] if queue else None
            began = self.clock.now()
            trial = self.study.ask(self.distributions)
            config = Config.of(trial.params)
            if queue and config == queue[0]:
                queue.pop(0)  # else ask() took a trial queued for a retry: this configuration stays next
            with heartbeat(self.study, trial, self.liveness):
                measured = self._step(trial, config)
            idle = 0 if measured else idle + 1
            if measured:  # a whole step: proposing, measuring and storing
                self.step_s.append(self.clock.now() - began)
                if probe is not None and proposer.forced is None:
                    probe.owed = max(0, probe.owed - 1)
            if config == proposer.forced and config not in self.known:
                # yielded (to a claim that may yield too, or to the original): back in line, behind the rest
                queue.append(config)
        return SearchOutcome(
            records=tuple(sorted(self.known.values(), key=lambda r: r.number)),
            original=self._original(),
            sampler=sampler,
            stop=stop,
            seconds=self.seconds,
            evaluation_s=self._evaluation_s(),
            own=self.own,
        )

    def _probes(self, probe: _Probe) -> list[Config]:
        """The unmeasured, feasible neighbours of the best configuration and its moves to the structural variants
        related to its own (`variant_moves`; else of the fastest at a size, where the best's were proposed already),
        every other round of the best of another structural variant instead, once per configuration and only when
        the sampler has had its turn since the last round; at most half the budget left."""
        if probe.owed:
            return []
        ok = [r for r in self.known.values() if r.objective is not None and r.timings]
        if not ok:
            return []
        # the best overall, then the fastest at each size: a per-size dispatch launches those where they win (a
        # variant that wins only the large sizes may lose the geometric mean to the original at its defaults)
        ranked = sorted(ok, key=lambda r: (r.objective or 0.0, r.number))
        leaders = [("the best configuration so far", ranked[0])]
        sizes = min(len(r.timings) for r in ok)
        leaders += [(f"the fastest at size {i}", min(ok, key=functools.partial(_at_size, i))) for i in range(sizes)]
        # every other round, the best of another structural variant (best first): a variant whose form wins only once
        # its own launch parameters move (fewer threads a block, more items a thread) would be measured at its first
        # values alone, never being the best so far, and the sampler, fitted to the leaders, rarely draws them
        others = [(f"the best of variant {r.config.get(VARIANT)}", r) for r in _best_per_variant(ranked)[1:]]
        order = [*others, *leaders] if probe.rounds % 2 else [*leaders, *others]
        what, best = next(((w, r.config) for w, r in order if r.config not in probe.done), ("", None))
        left = self.budget.trials - self.measured - len(self.claims) - self.waiting
        if best is None or left < 4:
            return []
        probe.done.add(best)
        found = [
            c
            for c in dict.fromkeys((*neighbours(best, self.check.space), *variant_moves(self.check, best)))
            if c not in self.known and c not in self.claims and self.check.violation(c) is None
        ]
        probe.rng.shuffle(found)  # a round cut short by the budget is an unbiased sample of the neighbours
        found = found[: left // 2]
        probe.owed = len(found)
        if found:
            probe.rounds += 1
            log.info("probing %d neighbours of %s: %s", len(found), what, best)
            self.backend.prefetch(found)
        return found

    def _original(self) -> TrialRecord:
        assert self.original is not None  # measured first, or raised
        return self.original

    def _baseline(self) -> tuple[Timing, ...]:
        """The original's timings on this worker's device: what its objectives are relative to."""
        # two GPUs of one model differ by a percent or so; against another device's original, the
        # configurations a slower GPU measured would rank behind and miss the shortlist
        if self.baseline is None:
            m = self.backend.evaluate(self.default)
            if not m.ok:
                raise StudyError(
                    f"the original configuration failed on this worker's device "
                    f"({m.failure.value if m.failure else 'no timings'}): {m.detail or 'no timings'}"
                )
            self.baseline = m.timings
        return self.baseline

    def _stop(self, queue: list[Config], sampler: str, feasible_count: int | None, idle: int) -> StopReason | None:
        self._refresh()
        # what others measured or are measuring is not this worker's to propose; the original comes first
        queue[:] = [c for c in queue if c not in self.known and c not in self.claims and c != self.default]
        if self.original is None:
            if self.default not in self.claims:
                queue.insert(0, self.default)
            return None  # nothing can be compared without the original: it is always measured
        if self.cancel is not None and self.cancel.is_set():
            return StopReason.CANCELLED
        if self.measured >= self.budget.trials:
            return StopReason.BUDGET
        if self.budget.search_seconds is not None and self.seconds >= self.budget.search_seconds:
            return StopReason.TIME
        step = statistics.median(self.step_s) if self.step_s else 0.0
        if not self.deadline.allows(step + self.keep_back(self._evaluation_s(), self._finalists())):
            return StopReason.TIME
        busy = self.claims or self.waiting  # work of others that may yet come back to be measured
        if sampler == GRID and not queue and not busy:
            return StopReason.EXHAUSTED
        if feasible_count is not None and self.measured >= feasible_count:
            return StopReason.EXHAUSTED
        if idle >= _MAX_IDLE:
            return StopReason.CONVERGED
        return None

    def _evaluation_s(self) -> float:
        """What one evaluation has cost in this run (median; 0 before any)."""
        return statistics.median(self.evaluation_s) if self.evaluation_s else 0.0

    def _finalists(self) -> int:
        """Configurations that ran correctly besides the original: what selection would re-measure."""
        return sum(1 for r in self.known.values() if r.ok and r.config != self.default)

    def _can_claim(self, queue: list[Config], sampler: str, feasible_count: int | None) -> bool:
        """Whether there is something this worker may take now (else others' claims must end first)."""
        if self.original is None:
            return self.default not in self.claims
        # queued retries come before new proposals: they hold their share of the budget
        taken = self.measured + len(self.claims)
        if self.waiting and taken < self.budget.trials:
            return True
        taken += self.waiting
        if taken >= self.budget.trials or (feasible_count is not None and taken >= feasible_count):
            return False
        return bool(queue) or sampler != GRID

    def _wait(self) -> None:
        """Wait for other workers' claims to end; fail the claims of those that died, for a retry."""
        fail_stale_trials(self.study, self.liveness)
        time.sleep(min(1.0, self.liveness.heartbeat_s))

    def _step(self, trial: optuna.Trial, config: Config) -> bool:
        """Finish one proposed trial; True when it measured a new configuration."""
        trial.set_user_attr(WORKER, self.worker)  # a retry inherits the dead worker's: overwritten
        queued = self._refresh(mine=trial.number)  # after this trial's parameters are written: the docstring
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
        rival: int | str | None = self.claims.get(config)
        if rival is None and self.measured + len(self.claims) + (0 if queued else self.waiting) >= self.budget.trials:
            rival = "budget"
        if rival is None and self.original is None and config != self.default:
            rival = "original"
        if queued and rival in ("budget", "original"):
            self.study.enqueue_trial(dict(config), skip_if_exists=False)  # a retry keeps its place, for later
        if rival is not None:
            # another live claim, or the budget taken: give this one up unmeasured (see the docstring)
            trial.set_user_attr(YIELDED_TO, rival)
            self.study.tell(trial, state=TrialState.FAIL)
            return False
        try:
            if config != self.default:
                self._baseline()  # before the configuration: its objective needs it
            began = self.clock.now()
            measurement = self.backend.evaluate(config)
            spent = self.clock.now() - began
            # compiling happens once per configuration: the phases after the search re-time compiled ones
            # (a replay's pacing stands for a whole evaluation, the same in every phase)
            compiled = measurement.compile.compile_seconds if measurement.compile and not self.clock.virtual else 0.0
            self.evaluation_s.append(max(spent - compiled, spent / 4))
        except BaseException:
            # Ctrl-C or a backend bug: a FAIL without a failure reason, measured again on resume
            self.study.tell(trial, state=TrialState.FAIL)
            raise
        record = self._measured(trial.number, config, measurement)
        if not self._record(trial, record):
            return False
        if config == self.default:
            if record.failure is not None:
                raise StudyError(f"the original configuration failed ({record.failure.value}): {record.detail}")
            self.original = record
            self.baseline = record.timings
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
        original = m.timings if config == self.default else self._baseline()
        return TrialRecord(number, config, objective(m.timings, original), timings=m.timings, compile=m.compile)

    def _record(self, trial: optuna.Trial, record: TrialRecord) -> bool:
        """Store a record in its trial; False when another worker took this worker for dead meanwhile."""
        try:
            for key, value in record_attrs(record).items():
                trial.set_user_attr(key, value)
            self._tell(trial, record)
        except UpdateFinishedTrialError:
            log.warning("trial %d was retried elsewhere (this worker was silent too long); dropped", trial.number)
            return False
        self.known[record.config] = record
        self.own += record.measured
        return True

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
        return progress_of(self.known.values(), self.budget)


def progress_of(records: Iterable[TrialRecord], budget: Budget) -> Progress:
    """Where a search stands, from the records of its study."""
    records = list(records)
    ok = [r for r in records if r.ok]
    best = min(ok, key=lambda r: r.objective or 0.0, default=None)
    return Progress(
        done=sum(r.measured for r in records),
        budget=budget.trials,
        failures=sum(r.measured and not r.ok for r in records),
        best=None if best is None else best.objective,
        best_config=None if best is None else best.config,
    )
