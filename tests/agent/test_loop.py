"""The agent loop: steps, stops (done, repeat, limit), the best template, and fallbacks from a failing LLM."""

from __future__ import annotations

import dataclasses
from typing import get_args

import pytest

from cutune.agent.builtin import BuiltinPlanner
from cutune.agent.errors import AgentError
from cutune.agent.history import Step, TestOutcome
from cutune.agent.llm import LLMPlanner
from cutune.agent.loop import PlanLoopStop, run_agent
from cutune.agent.registry import PLANNERS, make_planner
from cutune.agent.settings import AgentSettings, PlannerKind
from cutune.errors import CompileError
from cutune.project import KernelContext
from cutune.template.model import Template
from cutune.template.recipes import RECIPES
from tests.agent.builders import tune_result
from tests.agent.llm_server import FakeLLM, Reply, completion, plan_answer

BUILTIN = AgentSettings()


def by_space_size(t: Template) -> TestOutcome:
    """A stand-in test: smaller spaces score better (lower is better), deterministically."""
    return TestOutcome(float(t.space.size()), f"{t.space.size()} points")


def openai(llm: FakeLLM, *, timeout: float = 5.0) -> AgentSettings:
    return AgentSettings(kind="openai", base_url=llm.url, model="tuner-7b", timeout=timeout)


def test_the_registry_covers_every_kind(silu: KernelContext, llm: FakeLLM) -> None:
    assert set(PLANNERS) == set(get_args(PlannerKind))
    assert isinstance(make_planner(BUILTIN, silu), BuiltinPlanner)
    assert isinstance(make_planner(openai(llm), silu), LLMPlanner)
    with pytest.raises(AgentError, match="unknown agent kind 'claude'"):
        AgentSettings(kind="claude")  # type: ignore[arg-type]


def test_builtin_loop_follows_the_measurements_and_keeps_the_best(merge: KernelContext) -> None:
    def short_tune(t: Template) -> TestOutcome:
        # ITEMS_PER_THREAD=16 is what the small sizes needed: the stand-in measures 1.25x once it is offered
        items = t.space.param("ITEMS_PER_THREAD").values
        importances = {p.name: 0.3 for p in t.space.params} | {"MIN_BLOCKS": 0.01, "ITEMS_PER_THREAD": 0.02}
        result = tune_result(t.space, importances=importances, significant=16 in items)
        return TestOutcome(1.0 / (1.25 if 16 in items else 1.0), "short tune", result=result)

    seen: list[Step] = []
    run = run_agent(merge, BUILTIN, short_tune, on_step=seen.append)
    assert [s.iteration for s in run.steps] == [0, 1] and seen == list(run.steps)
    first, second = run.steps
    assert first.plan.recipes == tuple(RECIPES) and first.planner == "builtin" and first.fallback is None
    assert "launch_bounds" not in second.plan.recipes
    assert second.template.space.param("ITEMS_PER_THREAD").values == (1, 2, 4, 8, 16)
    assert run.stop is PlanLoopStop.DONE and "builtin planner is done" in run.message
    assert run.best is second and run.template is second.template
    assert "step 1 (builtin): recipes [" in second.render() and "score 0.8" in second.render()


def test_good_llm_plans_are_applied_until_one_repeats(silu: KernelContext, llm: FakeLLM, api_key: str) -> None:
    llm.queue(
        plan_answer(list(RECIPES), reason="start with everything"),
        plan_answer(
            ["block_threads", "compile_flags"],
            {"BLOCK_THREADS": [256, 512, 1024], "MAXRREGCOUNT": [0, 64]},
            reason="narrow to mid-size blocks",
        ),
    )  # the last answer repeats
    run = run_agent(silu, openai(llm), by_space_size, max_iterations=5)
    assert [s.planner for s in run.steps] == ["openai", "openai"]
    assert all(s.fallback is None for s in run.steps)
    assert run.steps[1].template.space.param("BLOCK_THREADS").values == (256, 512, 1024)
    assert run.stop is PlanLoopStop.REPEAT and "repeats step 1" in run.message
    assert run.best is run.steps[1]  # the smaller space scores lower
    assert len(llm.requests) == 3
    history = llm.requests[2].body["messages"][1]["content"]
    assert "step 0 (openai)" in history and "narrow to mid-size blocks" in history and "score " in history


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (completion("Let me think about this kernel... more threads!"), "the answer is not a JSON object"),
        (
            completion('{"recipes": ["block_threads"], "params": {"BLOCK_THREADS": "all"}}'),
            "params.BLOCK_THREADS must be a non-empty list",
        ),
        (Reply({"error": {"message": "upstream model crashed"}}, status=500), "HTTP 500"),
        (dataclasses.replace(plan_answer(["block_threads"]), delay=1.5), "no answer within 0.2 s"),
    ],
)
def test_a_failing_llm_falls_back_to_the_builtin_planner(
    silu: KernelContext, llm: FakeLLM, api_key: str, reply: Reply, why: str
) -> None:
    llm.queue(reply)
    run = run_agent(silu, openai(llm, timeout=0.2), by_space_size)
    assert run.steps and all(s.planner == "builtin" for s in run.steps)
    for step in run.steps:
        assert step.fallback is not None and f"LLM planner at {llm.url}" in step.fallback and why in step.fallback
        assert "fallback to the built-in planner" in step.render()
    assert run.steps[0].plan.recipes == tuple(RECIPES)  # the built-in first step, not an invented one
    assert run.stop is PlanLoopStop.DONE


def test_an_llm_plan_breaking_limits_falls_back(silu: KernelContext, llm: FakeLLM, api_key: str) -> None:
    llm.queue(plan_answer(["block_threads"], {"BLOCK_THREADS": [1024, 2048]}))
    run = run_agent(silu, openai(llm), by_space_size, max_iterations=1)
    (step,) = run.steps
    assert step.planner == "builtin" and step.fallback is not None
    assert step.fallback.startswith("the openai planner's plan (recipes [block_threads], values BLOCK_THREADS=")
    assert "2048 break the constraint 'BLOCK_THREADS <= max_threads_per_block'" in step.fallback
    assert run.stop is PlanLoopStop.MAX_ITERATIONS


def test_the_llm_saying_done_stops(silu: KernelContext, llm: FakeLLM, api_key: str) -> None:
    llm.queue(plan_answer(list(RECIPES)), plan_answer(["block_threads"], done=True, reason="nothing left to try"))
    run = run_agent(silu, openai(llm), by_space_size)
    assert len(run.steps) == 1 and run.stop is PlanLoopStop.DONE
    assert run.message == "the openai planner is done: nothing left to try"


def test_iterations_are_capped_and_the_lowest_score_wins(silu: KernelContext, llm: FakeLLM, api_key: str) -> None:
    llm.queue(
        plan_answer(["block_threads"], {"BLOCK_THREADS": [128, 256, 1024]}),
        plan_answer(["block_threads"], {"BLOCK_THREADS": [1024]}),
        plan_answer(["block_threads"], {"BLOCK_THREADS": [512, 1024]}),
    )
    run = run_agent(silu, openai(llm), by_space_size, max_iterations=2)
    assert len(run.steps) == 2 and run.stop is PlanLoopStop.MAX_ITERATIONS
    assert run.best is run.steps[1] and run.best.outcome.score == 1.0


def test_a_failing_test_is_unscored_and_the_first_step_stands(silu: KernelContext) -> None:
    def broken(t: Template) -> TestOutcome:
        raise CompileError("nvcc failed", log="error: identifier 'uint' is undefined")

    run = run_agent(silu, BUILTIN, broken)
    assert run.best is run.steps[0] and run.steps[0].outcome.score is None
    assert "the test failed: nvcc failed" in run.steps[0].outcome.summary


def test_at_least_one_iteration(silu: KernelContext) -> None:
    with pytest.raises(AgentError, match="at least one iteration"):
        run_agent(silu, BUILTIN, by_space_size, max_iterations=0)
