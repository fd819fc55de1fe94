"""cutune.agent: the measured loop (propose a variant → check → tune → analyse → plan) with built-in transforms
or an LLM's code, and the compile-only loop templatize → test → analyze → plan of the recipe planners."""

from cutune.agent.analysis import Analysis, Finding, FindingKind, ParamInfo, analyze
from cutune.agent.builtin import BuiltinPlanner
from cutune.agent.errors import AgentError
from cutune.agent.evaluate import compile_only_test, context_with, tuning_test
from cutune.agent.history import Step, TestOutcome, render_history
from cutune.agent.llm import LLMPlanner, parse_answer
from cutune.agent.loop import AgentRun, PlanLoopStop, run_agent
from cutune.agent.plan import Plan, apply_plan, param_owners
from cutune.agent.planner import Planner
from cutune.agent.record import Outcome, StepLog, StepRecord
from cutune.agent.registry import PLANNERS, make_planner
from cutune.agent.settings import AgentSettings, api_key_from_env
from cutune.agent.sources import BuiltinVariants, LLMVariants, VariantSource, make_source
from cutune.agent.steps import LoopOptions, LoopRun, MeasuredLoopStop, run_loop

__all__ = [
    "PLANNERS",
    "AgentError",
    "AgentRun",
    "AgentSettings",
    "Analysis",
    "BuiltinPlanner",
    "BuiltinVariants",
    "Finding",
    "FindingKind",
    "LLMPlanner",
    "LLMVariants",
    "LoopOptions",
    "LoopRun",
    "MeasuredLoopStop",
    "Outcome",
    "ParamInfo",
    "Plan",
    "PlanLoopStop",
    "Planner",
    "Step",
    "StepLog",
    "StepRecord",
    "TestOutcome",
    "VariantSource",
    "analyze",
    "api_key_from_env",
    "apply_plan",
    "compile_only_test",
    "context_with",
    "make_planner",
    "make_source",
    "param_owners",
    "parse_answer",
    "render_history",
    "run_agent",
    "run_loop",
    "tuning_test",
]
