"""The samplers a search can use, by name; `auto` picks exhaustive search when it fits the budget."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cutune.errors import StudyError

if TYPE_CHECKING:  # Optuna loads when a search starts: commands that only read options need not wait for it
    from optuna.samplers import BaseSampler

AUTO = "auto"
GRID = "grid"  # every feasible configuration, enqueued one by one (default first, then seeded order)


def _tpe(seed: int) -> BaseSampler:
    # One trial at a time (two kernels timed at once on one GPU spoil each other's numbers), so there
    # are no running trials for constant_liar to lie about; RUNNING trials left by a dead run are
    # failed when the study is opened.
    from optuna.samplers import TPESampler

    return TPESampler(seed=seed, multivariate=True, constant_liar=False)


def _random(seed: int) -> BaseSampler:
    from optuna.samplers import RandomSampler

    return RandomSampler(seed=seed)


SAMPLERS: dict[str, Callable[[int], BaseSampler]] = {
    "tpe": _tpe,
    "random": _random,
    GRID: _random,  # never consulted for a parameter: every grid trial is enqueued with fixed values
}
# No CMA-ES/GP/QMC: every parameter is categorical (a tuple of candidate values), which those
# samplers hand to an independent random sampler anyway.
NAMES = (AUTO, *SAMPLERS)


def resolve_sampler(name: str, *, pending: int | None, budget_left: int) -> str:
    """The sampler to run: `auto` → grid when all `pending` feasible configs fit `budget_left`, else tpe."""
    if name not in NAMES:
        raise StudyError(f"unknown sampler {name!r}; known: {', '.join(NAMES)}")
    if name == AUTO:
        return GRID if pending is not None and pending <= budget_left else "tpe"
    if name == GRID and pending is None:
        raise StudyError("the grid sampler needs a space small enough to enumerate; use tpe or random")
    return name
