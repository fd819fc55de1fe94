"""The built-in planner's rules, on hand-made analyses and on real ones of the samples."""

from __future__ import annotations

from collections.abc import Sequence

from cutune.agent.analysis import Analysis, Finding, FindingKind, ParamInfo, analyze
from cutune.agent.builtin import WIDEST, BuiltinPlanner
from cutune.agent.history import Step, TestOutcome
from cutune.agent.plan import Plan, apply_plan
from cutune.limits import limits_for
from cutune.project import KernelContext
from cutune.template.model import Refusal, Space, Template
from cutune.template.recipes import RECIPES
from tests.agent.builders import tune_result

NUM_THREADS = ParamInfo("NUM_THREADS", (32, 64, 128, 256, 512, 1024), 128, "block_threads", 0.02)
MIN_BLOCKS = ParamInfo("MIN_BLOCKS", (1, 2, 3, 4, 6, 8), 1, "launch_bounds", 0.01)
ITEMS = ParamInfo("ITEMS_PER_THREAD", (1, 2, 4, 8), 1, "items_per_thread", 0.03)
MAXRREG = ParamInfo("MAXRREGCOUNT", (0, 32, 64, 128, 255), 0, "compile_flags", 0.4)
APPLIED = ("block_threads", "launch_bounds", "items_per_thread", "compile_flags")


def analysis(
    *findings: Finding,
    params: Sequence[ParamInfo] = (NUM_THREADS, MIN_BLOCKS, ITEMS, MAXRREG),
    applied: Sequence[str] = APPLIED,
    refused: Sequence[Refusal] = (),
) -> Analysis:
    return Analysis("merge_attn_states_kernel", tuple(applied), tuple(refused), tuple(params), tuple(findings))


def after(plan: Plan) -> list[Step]:
    """A history whose last step applied `plan`."""
    t = Template("merge_attn_states_kernel", "", Space(()))
    return [Step(0, plan, "builtin", t, TestOutcome(1.0, "measured"), analysis())]


def unimportant(*params: ParamInfo) -> list[Finding]:
    return [
        Finding(FindingKind.PARAM_UNIMPORTANT, f"{p.name} explains 1%", param=p.name, recipe=p.recipe) for p in params
    ]


NO_GAIN = Finding(FindingKind.NO_SIGNIFICANT_GAIN, "no configuration beat the original")
LOW_SMALL = Finding(FindingKind.LOW_SOL_SMALL_SIZES, "small sizes are far from speed of light")
LAST = Plan.of(APPLIED, {"MIN_BLOCKS": [1, 2]})
planner = BuiltinPlanner()


def test_first_step_applies_every_recipe() -> None:
    plan = planner.propose(analysis(), [])
    assert plan.recipes == tuple(RECIPES) and not plan.done and plan.params == ()


def test_dropping_refused_recipes_alone_is_no_change() -> None:
    last = Plan.of([*APPLIED, "unroll"])
    a = analysis(refused=[Refusal("unroll", "no `#pragma unroll N` in the kernel")])
    plan = planner.propose(a, after(last))
    assert plan.done and "unroll" not in plan.recipes and plan.reason == "no rule proposes a change"


def test_unimportant_recipes_without_gain_are_dropped_with_their_values() -> None:
    plan = planner.propose(analysis(NO_GAIN, *unimportant(MIN_BLOCKS, NUM_THREADS)), after(LAST))
    assert not plan.done
    assert "launch_bounds" not in plan.recipes and plan.values("MIN_BLOCKS") is None
    assert "block_threads" not in plan.recipes
    assert "items_per_thread" in plan.recipes and "compile_flags" in plan.recipes  # ITEMS, MAXRREGCOUNT mattered
    assert "drop launch_bounds: MIN_BLOCKS changed nothing measurable" in plan.reason


def test_unimportant_recipes_stay_when_there_was_a_gain() -> None:
    gain = Finding(FindingKind.GAIN, "1.2x")
    assert planner.propose(analysis(gain, *unimportant(MIN_BLOCKS)), after(LAST)).done


def test_the_last_recipe_is_never_dropped() -> None:
    last = Plan.of(["block_threads"])
    a = analysis(NO_GAIN, *unimportant(NUM_THREADS), params=[NUM_THREADS], applied=["block_threads"])
    plan = planner.propose(a, after(last))
    assert plan.done and plan.recipes == ("block_threads",)


def test_low_sol_at_small_sizes_keeps_and_widens_items_per_thread() -> None:
    a = analysis(NO_GAIN, LOW_SMALL, *unimportant(ITEMS, MIN_BLOCKS))
    plan = planner.propose(a, after(LAST))
    assert "items_per_thread" in plan.recipes  # unimportant so far, but the small sizes need more work per thread
    assert plan.values("ITEMS_PER_THREAD") == (1, 2, 4, 8, 16)
    assert "launch_bounds" not in plan.recipes


def test_widening_stops_at_the_widest() -> None:
    wide = ParamInfo("ITEMS_PER_THREAD", (1, 2, 4, 8, WIDEST), 1, "items_per_thread")
    last = Plan.of([*APPLIED, "specialize"], {"ITEMS_PER_THREAD": [1, 2, 4, 8, WIDEST]})
    plan = planner.propose(analysis(LOW_SMALL, params=[NUM_THREADS, wide]), after(last))
    assert plan.done and plan.values("ITEMS_PER_THREAD") == (1, 2, 4, 8, WIDEST)


def test_low_sol_adds_work_recipes_missing_from_the_plan() -> None:
    last = Plan.of(["block_threads"])
    a = analysis(Finding(FindingKind.LOW_SOL, "40% everywhere"), params=[NUM_THREADS], applied=["block_threads"])
    plan = planner.propose(a, after(last))
    assert {"items_per_thread", "specialize"} <= set(plan.recipes)
    assert "far from speed of light: add items_per_thread, specialize" in plan.reason


def test_spills_at_large_blocks_cap_the_block_size() -> None:
    spills = Finding(FindingKind.SPILLS, "spills", param="NUM_THREADS", values=(512, 1024))
    plan = planner.propose(analysis(spills), after(LAST))
    assert plan.values("NUM_THREADS") == (32, 64, 128, 256)
    assert "spills at NUM_THREADS=512/1024: drop [512, 1024]" in plan.reason


def test_spill_capping_keeps_a_spilling_default() -> None:
    block = ParamInfo("BLOCK_THREADS", (32, 64, 128, 256, 512, 1024), 1024, "block_threads")
    spills = Finding(FindingKind.SPILLS, "spills", param="BLOCK_THREADS", values=(1024,))
    plan = planner.propose(
        analysis(spills, params=[block], applied=["block_threads"]), after(Plan.of(["block_threads"]))
    )
    assert plan.done and plan.values("BLOCK_THREADS") is None  # only the default spills: nothing to cut


def test_register_limited_adds_register_bounds_unless_refused() -> None:
    limited = Finding(FindingKind.REGISTER_LIMITED, "occupancy limited by registers")
    last = Plan.of(["block_threads", "items_per_thread"])
    a = analysis(limited, params=[NUM_THREADS, ITEMS], applied=last.recipes)
    plan = planner.propose(a, after(last))
    assert {"launch_bounds", "compile_flags"} <= set(plan.recipes) and not plan.done
    refused = analysis(
        limited,
        params=[NUM_THREADS, ITEMS],
        applied=last.recipes,
        refused=[Refusal("launch_bounds", "no __launch_bounds__")],
    )
    assert "launch_bounds" not in planner.propose(refused, after(last)).recipes


def test_real_analysis_of_merge_gives_an_applicable_plan(merge: KernelContext) -> None:
    space = merge.template.space
    importances = {p.name: 0.3 for p in space.params} | {"MIN_BLOCKS": 0.01, "ITEMS_PER_THREAD": 0.02}
    a = analyze(merge, merge.template, result=tune_result(space, importances=importances))
    plan = planner.propose(a, after(Plan.of(RECIPES)))
    assert "launch_bounds" not in plan.recipes and "items_per_thread" in plan.recipes
    t = apply_plan(merge.model, merge.kernel.name, plan, limits_for("sm_90"))
    assert t.space.param("ITEMS_PER_THREAD").values == (1, 2, 4, 8, 16)
    assert "MIN_BLOCKS" not in {p.name for p in t.space.params}
