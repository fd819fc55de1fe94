"""The agent loop: plan → templatize → test → analyze, until the planner is done, repeats, or runs out.

The caller's test scores a template (lower is better): a compile-only check on a CPU, a short tune on a
GPU (see cutune.agent.evaluate). A failing LLM planner never stops the loop: that step falls back to the
built-in rules and the step records why.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cutune.agent.analysis import Analysis, analyze
from cutune.agent.builtin import BuiltinPlanner
from cutune.agent.errors import AgentError
from cutune.agent.history import Step, TestOutcome
from cutune.agent.plan import Plan, apply_plan
from cutune.agent.planner import Planner
from cutune.agent.registry import make_planner
from cutune.agent.settings import AgentSettings
from cutune.errors import CutuneError
from cutune.limits import DeviceLimits, limits_for
from cutune.project import KernelContext
from cutune.template.model import Template

log = logging.getLogger(__name__)

TestFn = Callable[[Template], TestOutcome]
StepFn = Callable[[Step], None]


class PlanLoopStop(enum.Enum):
    """Why the loop ended."""

    DONE = "done"  # the planner proposed no further change
    REPEAT = "repeat"  # the next template was one already tested
    MAX_ITERATIONS = "max_iterations"
    PLAN_FAILED = "plan_failed"  # not even the built-in plan could be applied


@dataclass(frozen=True)
class AgentRun:
    """Every step, the best one, and why the loop stopped."""

    steps: tuple[Step, ...]
    best: Step  # the lowest score; the first step when no step could be scored
    stop: PlanLoopStop
    message: str  # the stop, in words

    @property
    def template(self) -> Template:
        """The best template."""
        return self.best.template


@dataclass(frozen=True)
class _Proposal:
    plan: Plan
    template: Template
    planner: str
    fallback: str | None


def run_agent(
    ctx: KernelContext,
    settings: AgentSettings,
    test: TestFn,
    *,
    max_iterations: int | None = None,
    on_step: StepFn | None = None,
) -> AgentRun:
    """Run the loop on `ctx`'s kernel (`max_iterations` overrides the settings'); best template by score."""
    iterations = settings.max_iterations if max_iterations is None else max_iterations
    if iterations < 1:
        raise AgentError(f"the agent needs at least one iteration, not {iterations}")
    limits = limits_for(settings.arch)
    planner = make_planner(settings, ctx)
    analysis = analyze(ctx, ctx.template)
    steps: list[Step] = []
    stop, message = PlanLoopStop.MAX_ITERATIONS, f"stopped after {iterations} iteration(s)"
    for i in range(iterations):
        try:
            proposal = _propose(planner, ctx, analysis, steps, limits)
        except AgentError as e:
            stop, message = PlanLoopStop.PLAN_FAILED, str(e)
            break
        seen = next((s for s in steps if _same(s.template, proposal.template)), None)
        if steps and (proposal.plan.done or seen is not None):
            stop, message = _why_stop(proposal, seen)
            break
        outcome = _run_test(test, proposal.template)
        analysis = analyze(ctx, proposal.template, check=outcome.check, result=outcome.result)
        step = Step(i, proposal.plan, proposal.planner, proposal.template, outcome, analysis, proposal.fallback)
        steps.append(step)
        if on_step is not None:
            on_step(step)
        if proposal.plan.done:
            stop, message = _why_stop(proposal, None)
            break
    if not steps:
        raise AgentError(f"no template of {ctx.kernel.name} could be tested: {message}")
    scored = [(score, s.iteration, s) for s in steps if (score := s.outcome.score) is not None]
    best = min(scored)[2] if scored else steps[0]  # the iteration breaks ties: the earlier step wins
    return AgentRun(tuple(steps), best, stop, message)


def _propose(
    planner: Planner, ctx: KernelContext, analysis: Analysis, history: Sequence[Step], limits: DeviceLimits
) -> _Proposal:
    """The planner's plan and its template; the built-in planner's when the planner fails."""
    try:
        return _proposal(planner, planner.propose(analysis, history), ctx, limits, None)
    except AgentError as e:
        if isinstance(planner, BuiltinPlanner):
            raise
        log.warning("%s; this step uses the built-in planner", e)
        fallback = BuiltinPlanner()
        return _proposal(fallback, fallback.propose(analysis, history), ctx, limits, str(e))


def _proposal(
    planner: Planner, plan: Plan, ctx: KernelContext, limits: DeviceLimits, fallback: str | None
) -> _Proposal:
    """The plan with its template; AgentError naming the planner when the plan does not apply."""
    try:
        template = apply_plan(ctx.model, ctx.kernel.name, plan, limits)
    except AgentError as e:
        raise AgentError(f"the {planner.name} planner's plan ({plan.describe()}) is invalid: {e}") from None
    return _Proposal(plan, template, planner.name, fallback)


def _run_test(test: TestFn, template: Template) -> TestOutcome:
    """The test's outcome; a test that raises a CutuneError is an unscored outcome saying why."""
    try:
        return test(template)
    except CutuneError as e:
        return TestOutcome(None, f"the test failed: {e}")


def _why_stop(proposal: _Proposal, seen: Step | None) -> tuple[PlanLoopStop, str]:
    if proposal.plan.done:
        return (
            PlanLoopStop.DONE,
            f"the {proposal.planner} planner is done: {proposal.plan.reason or 'no reason given'}",
        )
    assert seen is not None  # only a done plan or a repeat stops the loop early
    return PlanLoopStop.REPEAT, f"the next template repeats step {seen.iteration} ({proposal.plan.describe()})"


def _same(a: Template, b: Template) -> bool:
    return (a.source, a.space) == (b.source, b.space)
