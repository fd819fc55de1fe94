"""The planners by AgentSettings kind; the loop builds its planner from here, never by if/elif."""

from __future__ import annotations

from collections.abc import Callable

from cutune.agent.builtin import BuiltinPlanner
from cutune.agent.llm import LLMPlanner
from cutune.agent.planner import Planner
from cutune.agent.settings import AgentSettings
from cutune.project import KernelContext

PlannerFactory = Callable[[AgentSettings, KernelContext], Planner]

PLANNERS: dict[str, PlannerFactory] = {
    "builtin": lambda _settings, _ctx: BuiltinPlanner(),
    "openai": LLMPlanner.for_kernel,
}


def make_planner(settings: AgentSettings, ctx: KernelContext) -> Planner:
    """The planner `settings.kind` names, for the kernel of `ctx`."""
    return PLANNERS[settings.kind](settings, ctx)
