"""What one agent step did: the plan, who proposed it, the template it gave and how that template tested."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from cutune.agent.analysis import Analysis
from cutune.agent.plan import Plan
from cutune.check import CheckReport
from cutune.template.model import Template
from cutune.tune.result import TuneResult


@dataclass(frozen=True)
class TestOutcome:
    """What the caller's test found: a score (lower is better; None when it cannot score) and the reports."""

    __test__: ClassVar[bool] = False  # not a pytest test class, despite the name

    score: float | None
    summary: str
    check: CheckReport | None = None
    result: TuneResult | None = None


@dataclass(frozen=True)
class Step:
    """One iteration: the plan applied, its template, the test outcome and the analysis of both."""

    iteration: int  # from 0
    plan: Plan
    planner: str  # the planner whose plan was applied
    template: Template
    outcome: TestOutcome
    analysis: Analysis
    fallback: str | None = None  # why the configured planner's plan was replaced by the built-in one

    def render(self) -> str:
        """A few lines: the plan, the parameters searched and the outcome."""
        score = "unscored" if self.outcome.score is None else f"score {self.outcome.score:.4g}"
        params = ", ".join(f"{p.name}={list(p.values)}" for p in self.template.space.params) or "none"
        lines = [
            f"step {self.iteration} ({self.planner}): {self.plan.describe()}",
            f"  reason: {self.plan.reason or '-'}",
            f"  parameters: {params}",
            f"  outcome ({score}, lower is better): {self.outcome.summary}",
        ]
        if self.fallback is not None:
            lines.append(f"  fallback to the built-in planner: {self.fallback}")
        return "\n".join(lines)


def render_history(steps: Sequence[Step]) -> str:
    """The steps so far, oldest first; a note when there are none."""
    return "\n".join(s.render() for s in steps) or "no steps yet"
