"""The whole run's time budget: when it ends, and how much of it the phases after the search need.

`--seconds S` bounds the whole run (search, re-checks, selection, sanitizer, held-out sizes), so the
search stops early enough for the rest to fit: it keeps back what those phases are expected to cost,
priced in evaluations at what one evaluation has cost so far. Every later phase checks the deadline
before each round and ends with what it has (the original stands wherever nothing was confirmed), so a
run ends within about one round of `S` and always stores a verified result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cutune.gpu.clock import Clock
from cutune.tune.options import SelectionOptions

MIN_ROUNDS = 3  # fewer rounds confirm nothing
# sequential selection picks on this many rounds: the confirmation rounds, not these, decide what stands, and a third
# round moved the confirmed speedups of the replays by less than their seed-to-seed spread (benchmarks/README.md)
PICK_ROUNDS = 2
# selection rounds of fewer candidates run A c A: grouping them (SelectionOptions.between) would save a run or two and
# leave too few original runs to estimate the noise from (two finalists: 0.0005 estimated for a true 0.005)
GROUP_FROM = 4
# confirmation rounds group from two candidates: their noise is estimated with the selection rounds' original runs
CONFIRM_GROUP_FROM = 2

SANITIZER_S = 10.0  # compute-sanitizer on the winners: 6–17 s measured on an H100 (DESIGN.md)
_MAX_RESERVE = 0.4  # the search keeps at least 60% of the budget unless three finalists need more


def round_evaluations(candidates: int, between: int = 1, group_from: int = GROUP_FROM) -> int:
    """Evaluations of one round of `candidates`, `between` of them between two original runs (from `group_from`)."""
    step = between if candidates >= group_from else 1
    return candidates + math.ceil(candidates / step) + 1


def confirm_round_evaluations(finalists: int, options: SelectionOptions) -> int:
    """Evaluations of one confirmation round after `finalists`: about two configs (a pick, the single best)."""
    return round_evaluations(min(finalists, 2), options.between, CONFIRM_GROUP_FROM) if finalists else 0


@dataclass(frozen=True)
class Deadline:
    """The end of a run on `clock` (None: no limit)."""

    clock: Clock
    end: float | None = None

    @classmethod
    def after(cls, clock: Clock, seconds: float | None) -> Deadline:
        """A deadline `seconds` from now on `clock`; no limit for None."""
        return cls(clock, None if seconds is None else clock.now() + seconds)

    def left(self) -> float:
        """Seconds left (inf without a limit)."""
        return math.inf if self.end is None else self.end - self.clock.now()

    def allows(self, seconds: float) -> bool:
        """Whether something that takes `seconds` ends before the deadline."""
        return self.left() >= seconds


@dataclass(frozen=True)
class PhasePlan:
    """What the phases after the search cost, to be kept back from the search."""

    selection: SelectionOptions
    sizes: int
    sanitizer: bool  # whether compute-sanitizer runs on the winners (a fixed cost, not in evaluations)

    def _rounds(self, rounds: int, sequential: int = MIN_ROUNDS) -> int:
        """Rounds a phase plans for: sequential phases may end after `sequential` rounds (more if time is left)."""
        return sequential if self.selection.sequential else rounds

    def picking(self, finalists: int) -> int:
        """Evaluations of the selection rounds for `finalists`."""
        rounds = self._rounds(self.selection.rounds, PICK_ROUNDS)
        return rounds * round_evaluations(finalists, self.selection.between) if finalists else 0

    def confirming(self, finalists: int) -> int:
        """Evaluations of the confirmation rounds: the picks and the single best (about two configs)."""
        return self._rounds(self.selection.confirm_rounds) * confirm_round_evaluations(finalists, self.selection)

    def held_out(self, finalists: int) -> int:
        """Evaluations of the held-out rounds: the original against the launched configs, grouped as confirmation's."""
        return self._rounds(self.selection.confirm_rounds) * confirm_round_evaluations(finalists, self.selection)

    def after_search_s(self, evaluation_s: float, finalists: int) -> float:
        """Seconds the phases after the search take for `finalists` at `evaluation_s` per evaluation."""
        rechecks = self.selection.verify_seeds * finalists // 2  # a re-check runs each size once, untimed
        evaluations = rechecks + self.picking(finalists) + self.confirming(finalists) + self.held_out(finalists)
        return evaluations * evaluation_s + self.fixed_s(finalists)

    def fixed_s(self, finalists: int) -> float:
        """Seconds that do not scale with evaluations: compute-sanitizer on the winners."""
        return SANITIZER_S if self.sanitizer and finalists else 0.0

    def reserve(self, seconds: float, evaluation_s: float, finalists: int) -> float:
        """Seconds the search keeps back from a `seconds` budget when one evaluation costs `evaluation_s`."""
        # at most a share of the budget, unless a selection of three finalists needs more
        cap = max(_MAX_RESERVE * seconds, self.after_search_s(evaluation_s, min(finalists, 3)))
        return min(self.after_search_s(evaluation_s, finalists), cap)

    def finalists_within(self, seconds: float, evaluation_s: float, finalists: int) -> int:
        """The most finalists (≤ `finalists`, ≥ 1) whose phases after the search fit in `seconds`."""
        fit = finalists
        while fit > 1 and self.after_search_s(evaluation_s, fit) > seconds:
            fit -= 1
        return fit
