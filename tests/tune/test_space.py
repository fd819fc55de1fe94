from __future__ import annotations

import dataclasses

from optuna.distributions import CategoricalDistribution

from cutune.limits import limits_for
from cutune.template.model import Config
from cutune.tune.space import Feasibility, distributions, feasible_configs, neighbours
from tests.tune.fake_backend import SPACE, SPEC

LIMITS = limits_for("sm_90")


def test_one_categorical_distribution_per_parameter() -> None:
    dists = distributions(SPACE)
    assert dists == {
        "THREADS": CategoricalDistribution((64, 128, 256, 512, 1024, 2048)),
        "VEC": CategoricalDistribution((1, 2, 4, 8)),
        "UNROLL": CategoricalDistribution((1, 2, 4)),
    }


def test_feasible_configs_drop_hardware_and_spec_violations() -> None:
    feasible = feasible_configs(SPACE, SPEC, LIMITS)
    assert feasible is not None
    # 72 points; THREADS=2048 (12) and VEC*UNROLL=32 (5 more) cannot run
    assert len(feasible) == 72 - 12 - 5
    assert all(c["THREADS"] <= 1024 and c["VEC"] * c["UNROLL"] <= 16 for c in feasible)  # type: ignore[operator]
    assert SPACE.default() in feasible


def test_violation_names_the_rule() -> None:
    check = Feasibility(SPACE, SPEC, LIMITS)
    too_wide = check.violation(Config.of({"THREADS": 2048, "VEC": 1, "UNROLL": 1}))
    assert too_wide is not None and "2048 threads per block exceed 1024" in too_wide
    broken = check.violation(Config.of({"THREADS": 128, "VEC": 8, "UNROLL": 4}))
    assert broken is not None and "VEC * UNROLL <= 16" in broken
    assert check.violation(SPACE.default()) is None


def test_a_config_must_hold_at_every_size() -> None:
    spec = dataclasses.replace(SPEC, sizes=({"N": 1 << 20}, {"N": 3000}), constraints=("N % (THREADS * VEC) == 0",))
    check = Feasibility(SPACE, spec, LIMITS)
    why = check.violation(Config.of({"THREADS": 1024, "VEC": 4, "UNROLL": 1}))
    assert why is not None and "N=3000" in why
    # 3000 = 8 * 375: only blocks covering a divisor of both sizes pass
    assert check.violation(Config.of({"THREADS": 64, "VEC": 1, "UNROLL": 1})) is not None
    assert (
        Feasibility(SPACE, dataclasses.replace(spec, sizes=({"N": 1 << 20},)), LIMITS).violation(
            Config.of({"THREADS": 64, "VEC": 1, "UNROLL": 1})
        )
        is None
    )


def test_shared_memory_and_limits_are_names_in_expressions() -> None:
    spec = dataclasses.replace(
        SPEC, shared_mem="THREADS * VEC * 64", constraints=("THREADS <= max_threads_per_block / 2",)
    )
    check = Feasibility(SPACE, spec, LIMITS)
    # 1024 threads breaks the constraint that reads a device limit
    assert "does not hold" in (check.violation(Config.of({"THREADS": 1024, "VEC": 1, "UNROLL": 1})) or "")
    # 512 * 8 * 64 = 256 KiB of shared memory exceeds the opt-in maximum of sm_90
    why = check.violation(Config.of({"THREADS": 512, "VEC": 8, "UNROLL": 1}))
    assert why is not None and "shared memory" in why


def test_no_enumeration_beyond_the_budget() -> None:
    assert feasible_configs(SPACE, SPEC, LIMITS, budget=71) is None
    assert feasible_configs(SPACE, SPEC, LIMITS, budget=72) is not None


def test_neighbours_move_one_parameter_to_an_adjacent_value() -> None:
    found = neighbours(Config.of({"THREADS": 64, "VEC": 2, "UNROLL": 4}), SPACE)
    # THREADS has no value below 64 and UNROLL none above 4: one neighbour each on that side
    assert found == [
        Config.of({"THREADS": 128, "VEC": 2, "UNROLL": 4}),
        Config.of({"THREADS": 64, "VEC": 1, "UNROLL": 4}),
        Config.of({"THREADS": 64, "VEC": 4, "UNROLL": 4}),
        Config.of({"THREADS": 64, "VEC": 2, "UNROLL": 2}),
    ]
