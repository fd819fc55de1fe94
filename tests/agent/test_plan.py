"""Plans: normalisation, validation of candidate values against types, defaults and device limits."""

from __future__ import annotations

import pytest

from cutune.agent.errors import AgentError
from cutune.agent.plan import MAX_VALUES, Plan, apply_plan, param_owners
from cutune.errors import CutuneError
from cutune.limits import limits_for
from cutune.project import KernelContext
from cutune.template.model import Value
from cutune.template.recipes import RECIPES
from cutune.template.templatize import templatize

SM90 = limits_for("sm_90")


def test_plan_orders_recipes_as_the_registry_and_drops_duplicates() -> None:
    plan = Plan.of(["compile_flags", "block_threads", "compile_flags"], {"B": [2, 1, 2], "A": [True]})
    assert plan.recipes == ("block_threads", "compile_flags")
    assert plan.params == (("A", (True,)), ("B", (2, 1)))
    assert plan.values("B") == (2, 1) and plan.values("C") is None
    assert plan.same_as(Plan.of(["block_threads", "compile_flags"], {"A": [True], "B": [2, 1]}, done=True))
    assert issubclass(AgentError, CutuneError)


@pytest.mark.parametrize(
    ("recipes", "params", "message"),
    [
        (["block_threads", "warp_specialize"], {}, "unknown recipe(s) warp_specialize; known: block_threads"),
        ([], {}, "at least one recipe"),
        (["block_threads"], {"BLOCK_THREADS": []}, "gives BLOCK_THREADS no candidate values"),
    ],
)
def test_malformed_plans_are_refused(recipes: list[str], params: dict[str, list[Value]], message: str) -> None:
    with pytest.raises(AgentError) as e:
        Plan.of(recipes, params)
    assert message in str(e.value)


def test_narrowed_values_replace_the_recipes_own(silu: KernelContext) -> None:
    plan = Plan.of(["block_threads", "compile_flags"], {"BLOCK_THREADS": [1024, 256], "MAXRREGCOUNT": [0, 64]})
    t = apply_plan(silu.model, silu.kernel.name, plan, SM90)
    assert t.space.param("BLOCK_THREADS").values == (256, 1024)
    assert t.space.param("MAXRREGCOUNT").values == (0, 64)
    assert t.space.param("FAST_MATH").values == (False, True)  # not in the plan: the recipe's own
    plain = templatize(silu.model, silu.kernel.name, recipes=plan.recipes)
    assert t.source == plain.source and t.space.constraints == plain.space.constraints
    assert t.applied == ("block_threads", "compile_flags")


def test_extended_values_within_limits_are_accepted(merge: KernelContext) -> None:
    plan = Plan.of(list(RECIPES), {"ITEMS_PER_THREAD": [1, 2, 4, 8, 16], "NUM_THREADS": [96, 128, 160]})
    t = apply_plan(merge.model, merge.kernel.name, plan, SM90)
    assert t.space.param("ITEMS_PER_THREAD").values == (1, 2, 4, 8, 16)
    assert t.space.param("NUM_THREADS").values == (96, 128, 160)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"BLOCK_THREADS": [1024, 2048]},
            "BLOCK_THREADS: 2048 break the constraint 'BLOCK_THREADS <= max_threads_per_block' on sm_90",
        ),
        (
            {"BLOCK_THREADS": [100, 1024]},
            "BLOCK_THREADS: 100 break the constraint 'BLOCK_THREADS % warp_size == 0'",
        ),
        ({"BLOCK_THREADS": [128, 256]}, "must include the default 1024 (the original kernel's choice)"),
        ({"BLOCK_THREADS": [1024, 512.0]}, "BLOCK_THREADS takes int values (default 1024); not 512.0"),
        ({"BLOCK_THREADS": [1024, True]}, "BLOCK_THREADS takes int values (default 1024); not True"),
        ({"BLOCK_THREADS": [1024, "256"]}, "not '256'"),
        ({"FAST_MATH": [0, 1]}, "FAST_MATH takes bool values (default False); not 0, 1"),
        ({"MAXRREGCOUNT": [0, -32]}, "negative values [-32]"),
        ({"MAXRREGCOUNT": [0, 64, 512]}, "MAXRREGCOUNT: [512] exceed max_regs_per_thread = 255 on sm_90"),
        ({"BLOCK_THREADS": list(range(32, 32 * (MAX_VALUES + 2), 32))}, f"at most {MAX_VALUES}"),
        (
            {"ITEMS_PER_THREAD": [1, 2]},
            "the plan sets values for ITEMS_PER_THREAD, which recipes [block_threads, "
            "compile_flags] do not create on silu_and_mul_kernel",
        ),
    ],
)
def test_invalid_values_are_refused_with_the_reason(
    silu: KernelContext, params: dict[str, list[Value]], message: str
) -> None:
    plan = Plan.of(["block_threads", "compile_flags"], params)
    with pytest.raises(AgentError) as e:
        apply_plan(silu.model, silu.kernel.name, plan, SM90)
    assert message in str(e.value)


def test_constraints_across_parameters_are_left_to_the_search(merge: KernelContext) -> None:
    # NUM_THREADS * MIN_BLOCKS <= max_threads_per_sm involves two parameters: the search filters points
    default = merge.template.space.param("MIN_BLOCKS").default
    plan = Plan.of(list(RECIPES), {"NUM_THREADS": [128, 1024], "MIN_BLOCKS": [default, 8]})
    t = apply_plan(merge.model, merge.kernel.name, plan, SM90)
    assert t.space.param("MIN_BLOCKS").values == (default, 8)


def test_param_owners_follow_the_registry_order(merge: KernelContext) -> None:
    owners = param_owners(merge.model, merge.kernel.name, merge.template.applied)
    assert owners["NUM_THREADS"] == "block_threads"
    assert owners["MIN_BLOCKS"] == "launch_bounds"
    assert owners["ITEMS_PER_THREAD"] == "items_per_thread"
    assert owners["MAXRREGCOUNT"] == owners["FAST_MATH"] == "compile_flags"
    assert set(owners) == {p.name for p in merge.template.space.params}
