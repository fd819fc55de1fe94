"""Noise-aware selection of per-size winners: chosen in some rounds, confirmed and reported from others.

Every round measures A c1 A c2 A ... ck A (A the original, the candidates rotated from round to round),
so every candidate time is divided by the mean of the two original times around it: drift of clocks
and temperature cancels out. That gives one time ratio per round and problem size. Selection rounds of
at least GROUP_FROM finalists, and confirmation rounds of at least CONFIRM_GROUP_FROM candidates, run
`SelectionOptions.between` of them between two original runs (A c1 c2 A c3 c4 A: drift is slow, and a
quarter fewer evaluations); smaller selection rounds run A c A, whose few original runs would otherwise
estimate the noise badly (see deadline.py).

Two phases, on separate rounds, so that the numbers reported for a winner never come from the rounds
that picked it (the best of several noisy candidates always looks better than it is):

1. **Selection rounds** (`rounds`; PICK_ROUNDS when sequential): every shortlisted candidate. At each size the
   candidate with the lowest median ratio is picked when its gain exceeds the ratios' p10–p90 width and,
   within chance of its median, may exceed TIE_CAP (a pick that cannot gain more than 1% cannot change a
   speedup by more than 1%: the original stays, unconfirmed, and no confirmation rounds are spent on it);
   candidates whose ratio is within the noise of that lowest one, and at most 1% slower, are ties, and a tie
   goes to the candidate that changes the fewest parameters of the original (a smaller diff for a gain no
   measurement can tell apart, and the same pick from runs whose noise ordered the ties differently).
   The 1% cap: a smaller diff is worth little speed, and at few-µs sizes the noise alone spans 4–12%
   (rotary on an H100 gave that up at 4 of 7 sizes before the cap). Parameters that
   cannot differ per launch (compile flags for the whole file) are chosen once: per value of them the
   per-size picks are scored by the weighted geometric mean, the best such group is kept, and what it
   gives up against free per-size picks is recorded (`per_file_cost`). The single best configuration
   overall (lowest weighted geomean ratio, among those that may gain more than TIE_CAP at some size) is
   kept too, to state the gain of per-size picks over it.
2. **Confirmation rounds** (`confirm_rounds`): only the picks and the single best, again interleaved
   with the original. A pick stands at a size when, in these rounds, it was faster than the original
   in every round *and* its median gain exceeds the p10–p90 width; else the original is kept there.
   Under the null (a candidate identical to the original) each round is a coin flip, so surviving
   confirmation alone has probability 2^-confirm_rounds, on top of having been picked: the simulation
   test (tests/tune/test_select.py) measures the false-winner rate over many seeds at ≤ 1%.

Sequential (the default, `SelectionOptions.sequential`): the picks are made on PICK_ROUNDS selection rounds,
and the confirmation rounds end as soon as the evidence is enough. After the first selection round, a finalist
leaves when at no size it may gain more than TIE_CAP, or when at every size its ratio is behind the size's
leader by more than twice what chance makes of two medians (the noise is estimated from one round's few
original runs) and it is not a tie for the single best. The picks need no more rounds: the confirmation
rounds, not these, decide what stands and report it, so a pick made on fewer rounds can cost speed (a
near-tie picked the wrong way round) but never lets a slower configuration through. A candidate leaves the
confirmation rounds once each size it may be launched at is decided: it lost a round there (it can no
longer be confirmed) or it already passes the confirmation rule. Confirmation rounds of two or more
candidates run `between` of them between two original runs too: their noise is estimated with the
selection rounds' original runs as well, and that estimate is taken one standard error high (a MAD of m
log ratios is off by about 1/sqrt(m) of itself), so that a noise estimated low from few runs does not let a
no-op change through. Each round measures every size at once (one evaluation times all sizes), so rounds
are shared across sizes; in the confirmation rounds a pick is measured only at the sizes it was picked at
(the only ones it may be launched at; the single best, confirmed overall too, and the original at every size,
so that the noise estimate has every original run). A `Deadline` ends either phase early with what it has:
nothing is confirmed on fewer than MIN_ROUNDS rounds, so the original stands there.

Reported times (original and tuned, per size) are the confirmation rounds' pooled medians.
"""

from __future__ import annotations

import logging
import math
import statistics
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cutune.errors import StudyError
from cutune.gpu.backend import Backend, Timing
from cutune.gpu.replay import clock_of
from cutune.template.model import Config
from cutune.tune.deadline import (
    CONFIRM_GROUP_FROM,
    GROUP_FROM,
    MIN_ROUNDS,
    PICK_ROUNDS,
    Deadline,
    confirm_round_evaluations,
    round_evaluations,
)
from cutune.tune.geomean import weighted_geomean
from cutune.tune.options import SelectionOptions
from cutune.tune.search import SearchOutcome

log = logging.getLogger(__name__)

_Z = 3.2  # one-sided: a null median this far below 1 happens in about 0.07% of confirmations
TIE_CAP = math.log(1.01)  # the most speed a tie gives up for a config closer to the original
_WIDEN = math.sqrt(1.5)  # a round's ratio holds a candidate's noise and half of each neighbouring original's
# seconds to keep for later phases, given what one evaluation costs now
KeepFn = Callable[[float], float]


@dataclass(frozen=True)
class Verdict:
    """A candidate against the original over some rounds: median ratio, p10–p90 width, rounds it won."""

    ratio: float  # < 1 is faster
    spread: float
    wins: int = 0  # rounds in which it was faster than the original
    rounds: int = 0
    low: float = 0.0  # the lowest ratio of a round (its best)
    high: float = 0.0  # the highest ratio of a round (its worst)

    @property
    def significant(self) -> bool:
        """Faster by more than the spread, or faster in every round (over at least PICK_ROUNDS rounds)."""
        if self.rounds < PICK_ROUNDS:
            return False
        # at sizes of a few µs a round's ratio varies by 15% or more, and a candidate 15% faster in every
        # round would fail the spread; winning every round is the distribution-free evidence (a sign test),
        # and confirmation still asks for every round again and a gain beyond the original's own noise
        return 1.0 - self.ratio > self.spread or (self.rounds > 0 and self.wins == self.rounds)

    def confirmed(self, noise: float) -> bool:
        """Significant over at least MIN_ROUNDS rounds, faster in every round, and a gain beyond what `noise`
        (the sd of one original-against-original log ratio) can make of the median of these rounds."""
        # the median of n draws has about 1.25 sigma / sqrt(n) of spread; Z of those is chance ≪ 1%
        margin = _Z * 1.2533 * noise / math.sqrt(max(self.rounds, 1))
        enough = self.rounds >= MIN_ROUNDS and self.significant
        return enough and self.wins == self.rounds and -math.log(self.ratio) > margin

    @property
    def lost(self) -> bool:
        """Slower than the original in some round: confirmation (every round won) is out of reach."""
        return self.wins < self.rounds

    @classmethod
    def of(cls, ratios: Sequence[float]) -> Verdict:
        """The verdict on one ratio per round."""
        p10, p90 = p10_p90(ratios)
        return cls(
            ratio=statistics.median(ratios),
            spread=float(p90 - p10),
            wins=sum(r < 1.0 for r in ratios),
            rounds=len(ratios),
            low=min(ratios),
            high=max(ratios),
        )


@dataclass(frozen=True)
class Contender:
    """A re-measured candidate: timings per size over its rounds, and its verdicts."""

    config: Config
    timings: tuple[Timing, ...]
    per_size: tuple[Verdict, ...]
    overall: Verdict  # on the per-round weighted geometric mean over sizes
    # the job's sizes it was measured at, where not every one (`timings` and `per_size` follow them)
    sizes: tuple[int, ...] | None = None

    def verdict(self, index: int) -> Verdict:
        """The verdict at the job's size `index` (one it was measured at)."""
        return self.per_size[self._position(index)]

    def timing(self, index: int) -> Timing:
        """The pooled time at the job's size `index` (one it was measured at)."""
        return self.timings[self._position(index)]

    def measured_at(self, index: int) -> bool:
        """Whether it was measured at the job's size `index`."""
        return self.sizes is None or index in self.sizes

    def _position(self, index: int) -> int:
        return index if self.sizes is None else self.sizes.index(index)


@dataclass(frozen=True)
class Rounds:
    """Interleaved rounds of some candidates against the original."""

    original_timings: tuple[Timing, ...]  # per size, pooled over every original run
    contenders: tuple[Contender, ...]  # those that ran correctly in every round
    original_series: tuple[tuple[float, ...], ...] = ()  # per size, the original's medians in run order

    def of(self, config: Config) -> Contender | None:
        """The contender measuring `config`, if it ran correctly in every round."""
        return next((c for c in self.contenders if c.config == config), None)


@dataclass(frozen=True)
class Selection:
    """The outcome: what to launch at each size, with times from the confirmation rounds."""

    original: Config
    selection: Rounds  # every shortlisted candidate, the rounds that picked
    confirmation: Rounds  # the picks and the single best, the rounds that report
    chosen: tuple[Config, ...]  # per size: the confirmed pick, else the original
    single: Config | None  # the single best configuration over all sizes (selection rounds)
    per_file: Config  # the values chosen once for the file (compile flags); empty if none
    per_file_cost: float  # free per-size picks / picks under the file-wide choice (selection rounds, ≥ 1)
    overall_noise: float = 0.0  # the sd of one round's weighted geomean log ratio for a no-op change

    @property
    def original_timings(self) -> tuple[Timing, ...]:
        """The original's reported times per size."""
        return self.confirmation.original_timings

    def timing(self, config: Config, index: int) -> Timing:
        """The reported time of `config` at size `index` (the original's when it was not confirmed)."""
        found = self.confirmation.of(config)
        return found.timing(index) if found is not None and found.measured_at(index) else self.original_timings[index]

    def speedup(self, config: Config, index: int) -> float:
        """Original time / the reported time of `config` at size `index`."""
        return self.original_timings[index].median_us / self.timing(config, index).median_us

    @property
    def best(self) -> Contender | None:
        """The single best configuration when it is confirmed overall; None when the original stands."""
        found = self.confirmation.of(self.single) if self.single is not None else None
        return found if found is not None and found.overall.confirmed(self.overall_noise) else None

    def best_for_size(self, index: int) -> Contender | None:
        """The confirmed winner at size `index`; None when the original stands there."""
        return self.confirmation.of(self.chosen[index])


def shortlist(
    outcome: SearchOutcome,
    top_k: int,
    per_file: Sequence[str] = (),
    measure: Callable[[Config], bool] | None = None,
) -> tuple[Config, ...]:
    """The `top_k` measured configurations by objective, plus the fastest at each size, plus each one's
    twin with the original's `per_file` values (compile flags) where it was measured, or where `measure`
    (which evaluates it, checked against the original like any trial) says it is sound; no original."""
    ok = sorted(
        (r for r in outcome.records if r.ok and r.config != outcome.original.config), key=lambda r: r.objective or 0.0
    )
    chosen = [r.config for r in ok[:top_k]]
    for i in range(len(outcome.original.timings)):
        fastest = min(ok, key=lambda r: r.timings[i].median_us, default=None)
        if fastest is not None and fastest.config not in chosen:
            chosen.append(fastest.config)
    # flags that change nothing still make a search's ranking differ by noise: the twin lets the tie rule
    # of the selection choose the original's flags whichever of the two the search happened to rank first; and a
    # finalist whose flags differ from the original's can only share a per-size dispatch with the original (at the
    # sizes it loses) through its twin, so one the search never drew is measured now
    # (each right after its finalist: a selection that can only afford the first few keeps the pair)
    measured = {r.config for r in ok}
    original = outcome.original.config
    paired: list[Config] = []
    for config in chosen:
        paired.append(config)
        twin = Config.of({k: original[k] if k in per_file else v for k, v in config.items()})
        if twin in chosen or twin in paired:
            continue
        if twin in measured or (measure is not None and twin != original and measure(twin)):
            paired.append(twin)
    return tuple(paired)


def select(
    backend: Backend,
    original: Config,
    candidates: Sequence[Config],
    options: SelectionOptions,
    *,
    weights: Sequence[float] | None = None,
    per_file: Sequence[str] = (),
    cancel: threading.Event | None = None,
    deadline: Deadline | None = None,
    keep_s: KeepFn | None = None,
    confirming: int | None = None,
) -> Selection | None:
    """Pick per-size winners among `candidates` in selection rounds, confirm them in separate rounds.

    `weights` weigh the sizes in every geometric mean; `per_file` names the parameters that must take
    one value for all sizes (compile flags). Rounds end early at `deadline`, keeping back `keep_s` (given
    one evaluation's cost) for what comes after the selection, and the selection rounds keep back the
    time of `confirming` evaluations (default: every round for the picks). None if cancelled, or when the deadline
    left no time for a round of either phase (then the original stands everywhere).
    """
    after = keep_s or (lambda _e: 0.0)
    if confirming is None:
        confirming = options.confirm_rounds * confirm_round_evaluations(len(candidates), options)
    picking = measure_rounds(
        backend, original, candidates, PICK_ROUNDS if options.sequential else options.rounds, weights=weights,
        cancel=cancel, settled=_pruner(per_file) if options.sequential else None, deadline=deadline,
        keep_s=lambda e: after(e) + confirming * e, between=options.between,
    )  # fmt: skip
    if picking is None or not picking.original_series:
        return None
    sizes_count = len(picking.original_timings)
    w = [1.0] * sizes_count if weights is None else list(weights)
    picking_noise = original_noise(picking, bound=True)
    picked_on = max(c.overall.rounds for c in picking.contenders) if picking.contenders else 1
    margins = [min(tie_margin(n, picked_on), TIE_CAP) for n in picking_noise]
    overall_margin = min(tie_margin(combined_noise(picking_noise, w), picked_on), TIE_CAP)
    ratio_noise = [_WIDEN * n for n in picking_noise]
    picks, per_file_values, cost = _pick(picking, original, margins, ratio_noise, overall_margin, weights, per_file)
    for i in range(sizes_count):  # why a size keeps the original, at DEBUG level (the benchmarks log it)
        fastest = min(picking.contenders, key=_ratio_at(i), default=None)
        if fastest is not None:
            v = fastest.per_size[i]
            log.debug(
                "size %d: fastest %s ratio %.3f spread %.3f wins %d/%d (%s); picked %s",
                i, dict(fastest.config), v.ratio, v.spread, v.wins, v.rounds,
                "significant" if v.significant else "within its spread", dict(picks[i]),
            )  # fmt: skip
    # the single best is confirmed and stands in where a pick is not: only one that may gain more than 1% somewhere
    relevant = [c for c in picking.contenders if any(map(_may_gain, c.per_size, ratio_noise))]
    single = _fastest(relevant, lambda c: c.overall.ratio, original, overall_margin)
    confirm = list(dict.fromkeys([*(p for p in picks if p != original), *([single.config] if single else [])]))
    # where a size's pick is not confirmed, the single best stands in if confirmed there (and its compile flags
    # are the file's): the confirmation rounds measured it too, and it beats launching the original
    fallback = single.config if single is not None and flags_of(single.config, per_file) == per_file_values else None
    decided = _decider(picking, picks, single.config if single else None, fallback, w) if options.sequential else None
    # a pick only at the sizes it was picked at (the only ones it may be launched at); the single best everywhere
    at = {c: [i for i, p in enumerate(picks) if p == c] for c in confirm if single is None or c != single.config}
    checking = measure_rounds(
        backend, original, confirm, options.confirm_rounds, weights=weights, cancel=cancel, settled=decided,
        deadline=deadline, keep_s=after, between=options.between, group_from=CONFIRM_GROUP_FROM, at=at,
        original_at_all=True,
    )  # fmt: skip
    if checking is None or not checking.original_series:
        return None
    noise = original_noise(picking, checking, bound=True)
    chosen = []
    for i, pick in enumerate(picks):
        confirmed = original
        for candidate in dict.fromkeys(c for c in (pick, fallback) if c is not None and c != original):
            found = checking.of(candidate)
            if found is not None and found.verdict(i).confirmed(noise[i]):
                confirmed = candidate
                break
            verdict = found.verdict(i) if found is not None else "failed"
            log.debug("size %d: %s not confirmed (%s; noise %.4f)", i, dict(candidate), verdict, noise[i])
        chosen.append(confirmed)
    home = flags_of(original, per_file)
    if original in chosen and per_file_values != home:
        # a size keeps the original, whose time under the picks' compile flags (the file's) was never measured:
        # the file keeps the original's flags, chosen among the finalists that share them
        log.debug("the original stands at a size but its flags are not %s: selecting under its own", per_file_values)
        same = [c for c in candidates if flags_of(c, per_file) == home]
        if same:
            return select(
                backend, original, same, options, weights=weights, per_file=per_file, cancel=cancel,
                deadline=deadline, keep_s=keep_s,
            )  # fmt: skip
        chosen, per_file_values = [original] * len(chosen), home
    return Selection(
        original=original,
        selection=picking,
        confirmation=checking,
        chosen=tuple(chosen),
        single=single.config if single else None,
        per_file=per_file_values,
        per_file_cost=cost,
        overall_noise=combined_noise(noise, w),
    )


Settled = Callable[[Rounds], set[Config]]


def _pruner(per_file: Sequence[str]) -> Settled:
    """The selection rounds' early decisions: after a round, the finalists that may gain more than TIE_CAP at no
    size, or that are clearly slower than the leader of their compile flags at every size and no tie for the
    single best, leave."""

    def settled(rounds: Rounds) -> set[Config]:
        n = max((c.overall.rounds for c in rounds.contenders), default=0)
        alive = [c for c in rounds.contenders if c.overall.rounds == n]
        noise = original_noise(rounds)
        if len(alive) <= 1 or not any(noise):  # nothing to compare, or no spread to compare with yet
            return set()
        # a round's ratio holds a candidate's noise and half of each neighbouring original's: sqrt(1.5) sigma;
        # the noise itself is estimated from few original runs (those of one round), so the margins are doubled
        widen = 2.0 * _WIDEN
        overall_noise = combined_noise(noise, [1.0] * len(noise))
        overall_best = min(c.overall.ratio for c in alive)
        dropped = set()
        for c in alive:
            if not any(_may_gain(c.per_size[i], widen * noise[i]) for i in range(len(noise))):
                dropped.add(c.config)  # at most 1% faster than the original anywhere: no pick can matter
                log.debug("round %d: %s leaves: gains nowhere", n, c.config)
                continue
            if math.log(c.overall.ratio) - math.log(overall_best) <= tie_margin(widen * overall_noise, n):
                continue  # could still be the single best
            # picks share the file's flags: one slower than a finalist of other flags may still be its flags' best
            # (a twin under the original's flags, the only one that can share a dispatch with the original)
            peers = [a for a in alive if flags_of(a.config, per_file) == flags_of(c.config, per_file)]
            if all(_clearly_slower(c, peers, i, widen * noise[i], n) for i in range(len(noise))):
                dropped.add(c.config)
                log.debug("round %d: %s leaves: clearly slower than its flags' leader at every size", n, c.config)
        return dropped

    return settled


def _may_gain(v: Verdict, noise: float) -> bool:
    """The median ratio of `v` is within chance (`noise`: the sd of one round's log ratio) of a gain over the
    original beyond TIE_CAP: where no finalist may, no pick can change the outcome by more than 1%."""
    return -math.log(v.ratio) + _Z * 1.2533 * noise / math.sqrt(max(v.rounds, 1)) > TIE_CAP


def _clearly_slower(c: Contender, alive: Sequence[Contender], i: int, noise: float, rounds: int) -> bool:
    """At size `i`: slower than the leader by more than chance makes of two medians over `rounds`."""
    leader = min(alive, key=_ratio_at(i)).per_size[i]
    return math.log(c.per_size[i].ratio) - math.log(leader.ratio) > tie_margin(noise, rounds)


def _decider(
    picking: Rounds, picks: Sequence[Config], single: Config | None, fallback: Config | None, weights: Sequence[float]
) -> Settled:
    """The confirmation rounds' early decisions: a candidate leaves once every size it may launch at is
    decided (a round lost there, or the confirmation rule already met), and, for the single best, overall."""

    def settled(rounds: Rounds) -> set[Config]:
        noise = original_noise(picking, rounds, bound=True)
        overall = combined_noise(noise, weights)
        done = set()
        for c in rounds.contenders:
            where = [i for i, p in enumerate(picks) if p == c.config or c.config == fallback]
            sizes_done = all(c.verdict(i).lost or c.verdict(i).confirmed(noise[i]) for i in where)
            overall_done = c.config != single or c.overall.lost or c.overall.confirmed(overall)
            if sizes_done and overall_done:
                done.add(c.config)
        return done

    return settled


def combined_noise(noise: Sequence[float], weights: Sequence[float]) -> float:
    """The sd of a round's weighted geomean log ratio, from the per-size sds."""
    return math.sqrt(sum((wi * n) ** 2 for wi, n in zip(weights, noise, strict=True))) / sum(weights)


def tie_margin(noise: float, rounds: int) -> float:
    """How far apart (log ratio) two candidates' medians over `rounds` can land by chance alone."""
    # each median has about 1.25 sigma / sqrt(n) of spread, their difference sqrt(2) times that
    return _Z * 1.2533 * noise * math.sqrt(2.0 / max(rounds, 1))


def _fastest(
    contenders: Sequence[Contender], ratio: Callable[[Contender], float], original: Config, margin: float
) -> Contender | None:
    """The lowest `ratio`; among those within `margin` (log) of it, the one closest to the original."""
    best = min(contenders, key=ratio, default=None)
    if best is None:
        return None
    ties = [c for c in contenders if math.log(ratio(c)) - math.log(ratio(best)) <= margin]
    return min(ties, key=lambda c: (_changes(c.config, original), ratio(c)))


def _changes(config: Config, original: Config) -> int:
    """How many parameters `config` sets differently from the original."""
    return sum(1 for k, v in config.items() if original.get(k) != v)


def _pick(
    rounds: Rounds,
    original: Config,
    margins: Sequence[float],
    noise: Sequence[float],
    overall_margin: float,
    weights: Sequence[float] | None,
    per_file: Sequence[str],
) -> tuple[list[Config], Config, float]:
    """Per size the significantly fastest contender that may gain more than TIE_CAP (`noise`: the sd of a
    round's log ratio), a tie within `margins` going to the one closest to the original, all sharing one
    value of the per-file parameters (a tie within `overall_margin` likewise)."""

    def group_of(config: Config) -> Config:
        return flags_of(config, per_file)

    def picks_in(allowed: Callable[[Config], bool], fallback: Config | None) -> list[Config] | None:
        picks: list[Config] = []
        for i, margin in enumerate(margins):
            winners = [
                c
                for c in rounds.contenders
                if allowed(c.config) and c.per_size[i].significant and _may_gain(c.per_size[i], noise[i])
            ]
            best = _fastest(winners, _ratio_at(i), original, margin)
            if best is None and fallback is None:
                return None  # a size would need the original, whose compile flags differ
            picks.append(best.config if best is not None else original)
        return picks

    def score(picks: Sequence[Config]) -> float:
        ratios = [_ratio(rounds, p, i) for i, p in enumerate(picks)]
        return weighted_geomean(ratios, weights)

    free = picks_in(lambda c: True, original)
    assert free is not None
    home = group_of(original)
    options: dict[Config, list[Config]] = {}
    for group in dict.fromkeys([home, *(group_of(c.config) for c in rounds.contenders)]):
        found = picks_in(_member_of(group, group_of), original if group == home else None)
        if found is not None:
            options[group] = found
    best = min(score(picks) for picks in options.values())
    # groups within the noise of the best are ties too: the flags closest to the original's win
    ties = [g for g in options if math.log(score(options[g])) - math.log(best) <= overall_margin]
    group = min(ties, key=lambda g: (_changes(g, home), score(options[g])))
    return options[group], group, score(options[group]) / score(free)


def flags_of(config: Config, per_file: Sequence[str]) -> Config:
    """The values `config` gives the parameters chosen once for the file (compile flags)."""
    return Config.of({k: v for k, v in config.items() if k in per_file})


def _ratio_at(index: int) -> Callable[[Contender], float]:
    return lambda contender: contender.per_size[index].ratio


def _member_of(group: Config, group_of: Callable[[Config], Config]) -> Callable[[Config], bool]:
    return lambda config: group_of(config) == group


def _ratio(rounds: Rounds, config: Config, index: int) -> float:
    found = rounds.of(config)
    return found.per_size[index].ratio if found is not None else 1.0


def measure_rounds(
    backend: Backend,
    original: Config,
    candidates: Sequence[Config],
    count: int,
    *,
    weights: Sequence[float] | None = None,
    cancel: threading.Event | None = None,
    settled: Settled | None = None,
    deadline: Deadline | None = None,
    keep_s: KeepFn | None = None,
    between: int = 1,
    group_from: int = GROUP_FROM,
    at: Mapping[Config, Sequence[int]] | None = None,
    original_at_all: bool = False,
) -> Rounds | None:
    """Up to `count` rounds of A c1 A c2 ... A with the candidates rotated; None if cancelled.

    `between` candidates run between two original runs (A c1 c2 A c3 c4 A for 2), each divided by the mean
    of those two, in rounds of at least `group_from` candidates.
    After each round, the candidates `settled` names leave the later rounds (their rounds so far stand).
    A round starts only if it ends before `deadline` with `keep_s` (given one evaluation's cost) to spare.
    `at` measures each candidate it names only at those of the job's sizes (indices), and each original run
    after the first only at the sizes of the candidates on either side of it (at every size with
    `original_at_all`, whose noise estimate then has every run); a candidate it does not name runs at every size.
    """
    backend.prefetch([original, *candidates])
    clock = deadline.clock if deadline is not None else clock_of(backend)
    sizes_of: dict[Config, tuple[int, ...] | None] = {
        c: tuple(sorted(set(at[c]))) if at is not None and c in at else None for c in candidates
    }
    original_sizes = dict.fromkeys(candidates) if original_at_all else sizes_of
    original_runs: list[dict[int, Timing]] = []
    runs: dict[Config, list[tuple[Timing, ...]]] = {c: [] for c in candidates}
    ratios: dict[Config, list[list[float]]] = {c: [] for c in candidates}
    active = list(candidates)
    evaluation_s = 0.0
    for round_ in range(count):
        if cancel is not None and cancel.is_set():
            return None
        if round_ > 0 and not active:
            break
        step = between if len(active) >= group_from else 1
        planned = round_evaluations(len(active), between, group_from)
        if deadline is not None and not deadline.allows(planned * evaluation_s + (keep_s or _none)(evaluation_s)):
            break
        began = clock.now()
        shift = round_ % len(active) if active else 0
        order = active[shift:] + active[:shift]
        groups = [order[start : start + step] for start in range(0, len(order), step)]
        # the phase's first original run is at every size: each size has the original's time
        original_runs.append(
            _measure_original(backend, original, None if round_ == 0 else _union(original_sizes, groups[:1]))
        )
        for g, group in enumerate(groups):
            measured = [(config, backend.evaluate(config, sizes_of[config])) for config in group]
            before = original_runs[-1]
            after = _measure_original(backend, original, _union(original_sizes, groups[g : g + 2]))
            original_runs.append(after)
            for config, measurement in measured:
                if measurement.ok:
                    indices = sizes_of[config] or range(len(measurement.timings))
                    runs[config].append(measurement.timings)
                    ratios[config].append(
                        [
                            t.median_us / ((before[i].median_us + after[i].median_us) / 2)
                            for t, i in zip(measurement.timings, indices, strict=True)
                        ]
                    )
                else:  # correct during the search, not now: flaky, never reported as a speedup
                    del runs[config], ratios[config]
                    active.remove(config)
        evaluation_s = (clock.now() - began) / planned
        if settled is not None:
            done = settled(_rounds(runs, ratios, original_runs, weights, sizes_of))
            active = [c for c in active if c not in done]
    return _rounds(runs, ratios, original_runs, weights, sizes_of)


def _weights_at(weights: Sequence[float] | None, sizes: Sequence[int] | None) -> Sequence[float] | None:
    """The sizes' weights of the sizes a candidate was measured at."""
    return weights if weights is None or sizes is None else [weights[i] for i in sizes]


def _union(
    sizes_of: Mapping[Config, tuple[int, ...] | None], groups: Sequence[Sequence[Config]]
) -> tuple[int, ...] | None:
    """The sizes an original run between these groups needs: every size their candidates are measured at
    (None: all, also where there are no candidates)."""
    configs = [c for group in groups for c in group]
    if not configs or any(sizes_of[c] is None for c in configs):
        return None
    return tuple(sorted({i for c in configs for i in sizes_of[c] or ()}))


def _none(_evaluation_s: float) -> float:
    return 0.0


def _rounds(
    runs: dict[Config, list[tuple[Timing, ...]]],
    ratios: dict[Config, list[list[float]]],
    original_runs: Sequence[Mapping[int, Timing]],
    weights: Sequence[float] | None,
    sizes_of: Mapping[Config, tuple[int, ...] | None],
) -> Rounds:
    """The rounds so far: every candidate with at least one correct run, and the original's series."""
    contenders = tuple(
        Contender(
            config=c,
            timings=_pooled(runs[c]),
            per_size=tuple(Verdict.of(size_ratios) for size_ratios in zip(*ratios[c], strict=True)),
            overall=Verdict.of([weighted_geomean(r, _weights_at(weights, sizes_of[c])) for r in ratios[c]]),
            sizes=sizes_of[c],
        )
        for c in runs
        if runs[c]
    )
    measured = sorted({i for run in original_runs for i in run})
    per_size = [[run[i] for run in original_runs if i in run] for i in measured]
    series = tuple(tuple(t.median_us for t in timings) for timings in per_size)
    return Rounds(original_timings=tuple(map(_pool, per_size)), contenders=contenders, original_series=series)


def original_noise(*phases: Rounds, bound: bool = False) -> tuple[float, ...]:
    """Per size, the robust sd of log(A / mean of its two neighbours) over the original's runs: how far
    a configuration identical to the original lands from it in one round. With `bound`, one standard error
    above that estimate (a MAD of m values is off by about 1/sqrt(m) of itself): what the decisions use."""
    sizes = len(phases[0].original_timings)
    noise = []
    for i in range(sizes):
        logs = []
        for phase in phases:
            a = phase.original_series[i]
            logs += [math.log(a[j] / ((a[j - 1] + a[j + 1]) / 2)) for j in range(1, len(a) - 1)]
        mad = statistics.median(abs(x - statistics.median(logs)) for x in logs) if logs else 0.0
        noise.append(1.4826 * mad * (1.0 + 1.0 / math.sqrt(len(logs)) if bound and logs else 1.0))
    return tuple(noise)


def _measure_original(backend: Backend, original: Config, at: Sequence[int] | None = None) -> dict[int, Timing]:
    """The original's timings by size index, at the sizes `at` (None: all)."""
    measurement = backend.evaluate(original, at)
    if not measurement.ok:
        raise StudyError(
            f"the original configuration failed while re-measuring "
            f"({measurement.failure.value if measurement.failure else 'no timings'}): "
            f"{measurement.detail}"
        )
    return dict(zip(at if at is not None else range(len(measurement.timings)), measurement.timings, strict=True))


def p10_p90(values: Sequence[float]) -> tuple[float, float]:
    """The 10th and 90th percentiles, interpolated linearly (numpy's default), without numpy's overhead:
    the sequential selection recomputes them after every round."""
    ordered = sorted(values)
    return _percentile(ordered, 0.1), _percentile(ordered, 0.9)


def _percentile(ordered: Sequence[float], q: float) -> float:
    position = (len(ordered) - 1) * q
    lo = math.floor(position)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (position - lo)


def _pooled(runs: Sequence[tuple[Timing, ...]]) -> tuple[Timing, ...]:
    """Per size: the runs' timings pooled (`_pool`)."""
    return tuple(_pool(per_run) for per_run in zip(*runs, strict=True))


def _pool(timings: Sequence[Timing]) -> Timing:
    """The median and p10/p90 of one size's run medians, with their repetitions summed."""
    medians = [t.median_us for t in timings]
    p10, p90 = p10_p90(medians)
    return Timing(
        size=timings[0].size,
        median_us=statistics.median(medians),
        p10_us=float(p10),
        p90_us=float(p90),
        reps=sum(t.reps for t in timings),
    )
