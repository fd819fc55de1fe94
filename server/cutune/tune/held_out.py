"""Checking the dispatch where it was not tuned: sizes between tuned ones, measured against the original.

The rule (tune/dispatch.py) gives a size between two tuned ones the configuration of the lower one.
A held-out size sits between each two consecutive tuned values of the dispatch variable, once for each
tuned size at the lower value, with that size's other variables. Each where the rule launches a tuned
configuration is measured, each configuration only at the sizes it is launched at, interleaved with the
original (measured at those sizes too) in the confirmation manner; where the launched configuration is not
faster than the original there, the dispatch hands that range (from the held-out size up to the next tuned
one) back to the original. So at every tuned and held-out size the dispatch is the
original or was measured faster than it. Ranges no held-out size checks are named in the result
(`HeldOut.unchecked`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass

from cutune.errors import CutuneError
from cutune.gpu.backend import Backend, Job
from cutune.template.model import PDL, Binding, Config, Space
from cutune.tune.deadline import CONFIRM_GROUP_FROM, Deadline
from cutune.tune.dispatch import DispatchPlan, held_out_sizes, plan_dispatch, unchecked_ranges
from cutune.tune.options import SelectionOptions
from cutune.tune.result import SizeResult
from cutune.tune.select import MIN_ROUNDS, Rounds, Selection, flags_of, measure_rounds

_PER_FILE = (Binding.FLAG, Binding.DEFINE)


@dataclass(frozen=True)
class HeldOut:
    """The dispatch after the held-out check, and what was measured there."""

    plan: DispatchPlan
    sizes: tuple[SizeResult, ...]
    note: str = ""  # why the held-out sizes were not measured, or why the original stands everywhere
    unchecked: tuple[str, ...] = ()  # ranges between tuned sizes that no held-out size checks, in words


def per_file_params(space: Space) -> tuple[str, ...]:
    """Parameters that cannot differ per launch: compile flags and defines apply to the whole file, and PDL's
    launch attribute is written at the launch site every size shares."""
    return tuple(p.name for p in space.params if p.binding in _PER_FILE or p.name == PDL)


def check_held_out(
    backend: Backend,
    job: Job,
    selection: Selection,
    options: SelectionOptions,
    *,
    cancel: threading.Event | None = None,
    deadline: Deadline | None = None,
) -> HeldOut:
    """Measure the dispatch at held-out sizes (reopening `backend` on them) and fall back where it loses.

    Sequential (`options.sequential`): a configuration leaves the rounds once, at every held-out size it
    launches at, the rounds left cannot change whether it wins there (`decided`). Without time for the rounds before
    `deadline`, the held-out sizes are left unmeasured and said so."""
    spec, original, chosen = job.spec, selection.original, selection.chosen
    keyed = spec.keyed_sizes()
    plan = plan_dispatch(keyed, chosen, original)
    # only where the rule launches a tuned configuration (the tuned size below's): the original needs no check
    held = [
        (i, size)
        for i, s in held_out_sizes(keyed, spec.multiple_of)
        if plan.config_for(size := spec.with_bounds(s)) != original
    ]
    launched = [plan.config_for(size) for _, size in held]
    configs = list(dict.fromkeys(launched))
    if not configs:
        return HeldOut(plan, (), unchecked=unchecked_ranges(plan, keyed, spec.multiple_of))
    backend.close()
    try:
        # no ragged sizes of their own: every configuration measured here was checked at the tuned sizes' tails
        held_spec = dataclasses.replace(spec, sizes=tuple(s for _, s in held), weights=(), ragged=False)
        backend.open(dataclasses.replace(job, spec=held_spec))
        settled = decided(launched, options.confirm_rounds) if options.sequential else None
        # each configuration only at the sizes it is launched at, the original around it at those too;
        # grouped as the confirmation rounds are (A c1 c2 A): the verdicts here take no noise estimate from the runs
        at = {c: [j for j, config in enumerate(launched) if config == c] for c in configs}
        rounds = measure_rounds(
            backend, original, configs, options.confirm_rounds, cancel=cancel, settled=settled, deadline=deadline,
            between=options.between, group_from=CONFIRM_GROUP_FROM, at=at,
        )  # fmt: skip
    except CutuneError as e:  # e.g. a replayed recording without these sizes: the tuned sizes still stand
        return HeldOut(plan, (), note=f"not measured: {e}")
    if rounds is None:
        return HeldOut(plan, (), note="not measured: cancelled")
    if not rounds.original_series or any(c.overall.rounds < MIN_ROUNDS for c in rounds.contenders):
        # out of time: the tuned sizes stand, the ranges between them are unchecked
        why = "not measured: the time budget ran out first"
        return HeldOut(plan, (), note=why, unchecked=unchecked_ranges(plan, keyed, spec.multiple_of))
    slower_from: dict[int, int] = {}
    results = []
    for j, (lo, size) in enumerate(held):
        base = rounds.original_timings[j]
        measured = rounds.of(launched[j])
        wins = measured is not None and measured.verdict(j).ratio < 1.0
        if launched[j] != original and not wins:
            slower_from[lo] = size[plan.variable]
        config = launched[j] if wins else original
        tuned = measured.timing(j) if wins and measured is not None else base
        results.append(
            SizeResult(
                size=size,
                original=base,
                tuned=tuned,
                best_config=config,
                best_timing=tuned,
                significant=config != original,
                held_out=True,
            )
        )
    if slower_from and flags_of(original, tuple(selection.per_file)) != selection.per_file:
        # the original would launch in a range, under the dispatch's compile flags (the file's), where its time was
        # never measured: the original stands everywhere, under its own flags
        everywhere = plan_dispatch(keyed, [original] * len(chosen), original)
        results = [
            dataclasses.replace(r, best_config=original, tuned=r.original, best_timing=r.original, significant=False)
            for r in results
        ]
        why = (
            f"one was not faster, and the original cannot launch there under the dispatch's compile flags "
            f"({selection.per_file}): the original stands everywhere"
        )
        return HeldOut(everywhere, tuple(results), note=why)
    final = plan_dispatch(keyed, chosen, original, slower_from=slower_from)
    return HeldOut(final, tuple(results), unchecked=unchecked_ranges(final, keyed, spec.multiple_of))


def decided(launched: list[Config], count: int) -> Callable[[Rounds], set[Config]]:
    """Configurations whose every held-out size is decided after at least MIN_ROUNDS of at most `count` rounds:
    more than half of `count` rounds won there (the median ratio stays below 1 whatever the rest give), or
    more than half lost (it cannot get below 1)."""

    def settled(rounds: Rounds) -> set[Config]:
        done = set()
        for c in rounds.contenders:
            verdicts = [c.verdict(j) for j, config in enumerate(launched) if config == c.config]
            if c.overall.rounds >= MIN_ROUNDS and all(max(v.wins, v.rounds - v.wins) > count // 2 for v in verdicts):
                done.add(c.config)
        return done

    return settled
