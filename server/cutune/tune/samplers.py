"""The samplers a search can use, by name; `auto` picks exhaustive search when it fits the budget."""

from __future__ import annotations

from collections.abc import Callable

from optuna.samplers import BaseSampler, RandomSampler, TPESampler

from cutune.errors import StudyError

AUTO = "auto"
GRID = "grid"  # every feasible configuration, enqueued one by one (default first, then seeded order)


def _tpe(seed: int) -> BaseSampler:
    # One trial at a time (two kernels timed at once on one GPU spoil each other's numbers), so there
    # are no running trials for constant_liar to lie about; RUNNING trials left by a dead run are
    # failed when the study is opened.
    return TPESampler(seed=seed, multivariate=True, constant_liar=False)


SAMPLERS: dict[str, Callable[[int], BaseSampler]] = {
    "tpe": _tpe,
    "random": lambda seed: RandomSampler(seed=seed),
    # never consulted for a parameter: every grid trial is enqueued with fixed values
    GRID: lambda seed: RandomSampler(seed=seed),
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
