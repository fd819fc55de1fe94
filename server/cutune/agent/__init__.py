"""cutune.agent: the loop templatize → test → analyze → plan, with built-in and LLM planners."""

from cutune.agent.analysis import Analysis, Finding, FindingKind, ParamInfo, analyze
from cutune.agent.builtin import BuiltinPlanner
from cutune.agent.errors import AgentError
from cutune.agent.evaluate import compile_only_test, context_with, tuning_test
from cutune.agent.history import Step, TestOutcome, render_history
from cutune.agent.llm import LLMPlanner, parse_answer
from cutune.agent.loop import AgentRun, PlanLoopStop, run_agent
from cutune.agent.plan import Plan, apply_plan, param_owners
from cutune.agent.planner import Planner
from cutune.agent.registry import PLANNERS, make_planner
from cutune.agent.settings import AgentSettings, api_key_from_env

__all__ = [
    "PLANNERS",
    "AgentError",
    "AgentRun",
    "AgentSettings",
    "Analysis",
    "BuiltinPlanner",
    "Finding",
    "FindingKind",
    "LLMPlanner",
    "ParamInfo",
    "Plan",
    "PlanLoopStop",
    "Planner",
    "Step",
    "TestOutcome",
    "analyze",
    "api_key_from_env",
    "apply_plan",
    "compile_only_test",
    "context_with",
    "make_planner",
    "param_owners",
    "parse_answer",
    "render_history",
    "run_agent",
    "tuning_test",
]
