"""Compile-only tests with the real nvcc: resource reports become findings, findings become plans."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cutune.agent.analysis import FindingKind, analyze
from cutune.agent.builtin import BuiltinPlanner
from cutune.agent.evaluate import compile_only_test, context_with
from cutune.agent.history import Step
from cutune.agent.loop import PlanLoopStop, run_agent
from cutune.agent.plan import Plan, apply_plan
from cutune.agent.settings import AgentSettings
from cutune.limits import limits_for
from cutune.project import KernelContext, open_kernel

DATA = Path(__file__).parent / "data"


def with_launch(ctx: KernelContext, block: str) -> KernelContext:
    """`ctx` with its drafted spec, the launch filled in (a compile-only check never runs the kernel)."""
    spec = dataclasses.replace(ctx.drafted_spec(), grid=("1024",), block=(block,), space=None)
    return dataclasses.replace(ctx, spec=spec, spec_error=None)


def test_context_with_searches_the_template_space(silu: KernelContext) -> None:
    plan = Plan.of(["block_threads"], {"BLOCK_THREADS": [512, 1024]})
    t = apply_plan(silu.model, silu.kernel.name, plan, limits_for("sm_90"))
    ctx = context_with(with_launch(silu, "BLOCK_THREADS"), t)
    assert ctx.template is t and ctx.space == t.space
    assert ctx.template_model.text == t.source and ctx.kernel == silu.kernel


@pytest.mark.nvcc
def test_real_spills_are_blamed_and_planned_away(tmp_path: Path) -> None:
    ctx = with_launch(
        open_kernel(DATA / "accumulate.cu", "accumulate_kernel", recipes=("block_threads", "compile_flags")),
        "BLOCK_THREADS",
    )
    plan = Plan.of(
        ["block_threads", "compile_flags"],
        {"BLOCK_THREADS": [128, 256], "MAXRREGCOUNT": [0, 32], "FAST_MATH": [False]},
    )
    template = apply_plan(ctx.model, ctx.kernel.name, plan, limits_for("sm_90"))
    outcome = compile_only_test(ctx, cache_dir=tmp_path)(template)
    assert outcome.check is not None and len(outcome.check.rows) == 4
    assert outcome.score == -2.0 and outcome.summary.startswith("2 of 4 checked configurations")
    analysis = analyze(ctx, template, check=outcome.check)
    (spills,) = analysis.of(FindingKind.SPILLS)
    assert spills.param == "MAXRREGCOUNT" and spills.values == (32,)

    step = Step(0, plan, "builtin", template, outcome, analysis)
    follow = BuiltinPlanner().propose(analysis, [step])
    assert follow.values("MAXRREGCOUNT") == (0,) and "spills at MAXRREGCOUNT=32" in follow.reason


@pytest.mark.nvcc
def test_the_builtin_loop_on_silu_with_nvcc(silu: KernelContext, tmp_path: Path) -> None:
    ctx = with_launch(silu, "BLOCK_THREADS")
    run = run_agent(ctx, AgentSettings(), compile_only_test(ctx, limit=3, cache_dir=tmp_path))
    # nothing spills and the refused recipes were already idle: the rules have no change to propose
    assert len(run.steps) == 1 and run.stop is PlanLoopStop.DONE and run.best is run.steps[0]
    report = run.steps[0].outcome.check
    assert report is not None and len(report.rows) == 3
    original = report.rows[0]
    assert original.config == run.steps[0].template.space.default()
    assert original.usage is not None and original.usage.registers > 0 and not original.usage.spills
    assert run.steps[0].outcome.score == -float(sum(r.feasible for r in report.rows))
