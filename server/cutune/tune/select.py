"""Noise-aware selection: re-measure the best few interleaved with the original; keep only real gains.

Each round measures A c1 A c2 A ... ck A (A the original, the candidates rotated from round to round),
so every candidate time is divided by the mean of the two original times around it: drift of clocks
and temperature cancels out. Over the rounds that gives, per problem size, a set of ratios. A candidate
wins at a size when its median ratio is below 1 by more than the ratios' p10–p90 width: a gain smaller
than the run-to-run spread is not a gain. The same rule on the per-round geometric mean over sizes
decides overall. No winner overall means the original stands, so a tuned result is never slower.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cutune.errors import StudyError
from cutune.gpu.backend import Backend, Timing
from cutune.template.model import Config
from cutune.tune.options import SelectionOptions
from cutune.tune.search import SearchOutcome


@dataclass(frozen=True)
class Verdict:
    """A candidate against the original over the rounds: median time ratio and its p10–p90 width."""

    ratio: float  # < 1 is faster
    spread: float

    @property
    def significant(self) -> bool:
        """Faster by more than the spread."""
        return 1.0 - self.ratio > self.spread

    @classmethod
    def of(cls, ratios: Sequence[float]) -> Verdict:
        """The verdict on one ratio per round."""
        p10, p90 = np.percentile(ratios, [10, 90])
        return cls(ratio=statistics.median(ratios), spread=float(p90 - p10))


@dataclass(frozen=True)
class Contender:
    """A re-measured candidate: timings per size over the rounds, and its verdicts."""

    config: Config
    timings: tuple[Timing, ...]
    per_size: tuple[Verdict, ...]
    overall: Verdict


@dataclass(frozen=True)
class Selection:
    """The outcome of the re-measurement."""

    original: Config
    original_timings: tuple[Timing, ...]  # per size, over every original run of the rounds
    contenders: tuple[Contender, ...]  # those that ran correctly in every round

    @property
    def best(self) -> Contender | None:
        """The significantly fastest contender overall; None when the original stands."""
        winners = [c for c in self.contenders if c.overall.significant]
        return min(winners, key=lambda c: c.overall.ratio, default=None)

    def best_for_size(self, index: int) -> Contender | None:
        """The significantly fastest contender at problem size `index`; None when the original stands."""
        winners = [c for c in self.contenders if c.per_size[index].significant]
        return min(winners, key=lambda c: c.per_size[index].ratio, default=None)


def shortlist(outcome: SearchOutcome, top_k: int) -> tuple[Config, ...]:
    """The `top_k` measured configurations by objective, plus the fastest at each size; no original."""
    ok = sorted(
        (r for r in outcome.records if r.ok and r.config != outcome.original.config), key=lambda r: r.objective or 0.0
    )
    chosen = [r.config for r in ok[:top_k]]
    for i in range(len(outcome.original.timings)):
        fastest = min(ok, key=lambda r: r.timings[i].median_us, default=None)
        if fastest is not None and fastest.config not in chosen:
            chosen.append(fastest.config)
    return tuple(chosen)


def select(
    backend: Backend,
    original: Config,
    candidates: Sequence[Config],
    options: SelectionOptions,
    *,
    cancel: threading.Event | None = None,
) -> Selection | None:
    """Re-measure `candidates` interleaved with `original` for some rounds; None if cancelled."""
    backend.prefetch([original, *candidates])
    original_runs: list[tuple[Timing, ...]] = []
    runs: dict[Config, list[tuple[Timing, ...]]] = {c: [] for c in candidates}
    ratios: dict[Config, list[list[float]]] = {c: [] for c in candidates}
    for round_ in range(options.rounds):
        if cancel is not None and cancel.is_set():
            return None
        alive = list(runs)
        shift = round_ % len(alive) if alive else 0
        before = _measure_original(backend, original)
        original_runs.append(before)
        for config in alive[shift:] + alive[:shift]:
            measurement = backend.evaluate(config)
            after = _measure_original(backend, original)
            original_runs.append(after)
            if measurement.ok:
                runs[config].append(measurement.timings)
                ratios[config].append(
                    [
                        t.median_us / ((b.median_us + a.median_us) / 2)
                        for t, b, a in zip(measurement.timings, before, after, strict=True)
                    ]
                )
            else:  # correct during the search, not now: flaky, never reported as a speedup
                del runs[config], ratios[config]
            before = after
    contenders = tuple(
        Contender(
            config=c,
            timings=_pooled(runs[c]),
            per_size=tuple(Verdict.of(size_ratios) for size_ratios in zip(*ratios[c], strict=True)),
            overall=Verdict.of([statistics.geometric_mean(r) for r in ratios[c]]),
        )
        for c in runs
    )
    return Selection(original=original, original_timings=_pooled(original_runs), contenders=contenders)


def _measure_original(backend: Backend, original: Config) -> tuple[Timing, ...]:
    measurement = backend.evaluate(original)
    if not measurement.ok:
        raise StudyError(
            f"the original configuration failed while re-measuring "
            f"({measurement.failure.value if measurement.failure else 'no timings'}): "
            f"{measurement.detail}"
        )
    return measurement.timings


def _pooled(runs: Sequence[tuple[Timing, ...]]) -> tuple[Timing, ...]:
    """Per size: the median and p10/p90 of the runs' medians, with their repetitions summed."""
    pooled = []
    for per_run in zip(*runs, strict=True):
        medians = [t.median_us for t in per_run]
        p10, p90 = np.percentile(medians, [10, 90])
        pooled.append(
            Timing(
                size=per_run[0].size,
                median_us=statistics.median(medians),
                p10_us=float(p10),
                p90_us=float(p90),
                reps=sum(t.reps for t in per_run),
            )
        )
    return tuple(pooled)
