"""Agent settings: who proposes templates, where, and for how long; the API key comes from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from cutune.agent.errors import AgentError

PlannerKind = Literal["builtin", "openai"]
# Read in this order; the key is never a setting, so it never lands in a settings file or a log.
API_KEY_VARIABLES = ("CUTUNE_LLM_API_KEY", "OPENAI_API_KEY")


@dataclass(frozen=True)
class AgentSettings:
    """How the agent plans: the built-in rules, or an OpenAI-compatible model at `base_url`."""

    kind: PlannerKind = "builtin"
    base_url: str = ""  # "" for the OpenAI client's default endpoint
    model: str = ""
    timeout: float = 60.0  # seconds per LLM request
    max_iterations: int = 3  # recipe-planner iterations; on a GPU, the measured loop's steps
    arch: str = "sm_90"  # the target whose limits a plan's values must respect
    autotune: bool = False  # the editor's Autotune runs the measured agent loop instead of one search
    target_pct: float = 85.0  # the loop stops once the large sizes reach this % of the floor
    step_trials: int = 32  # the brief tune of each step

    def __post_init__(self) -> None:
        if self.kind not in get_args(PlannerKind):
            raise AgentError(f"unknown agent kind {self.kind!r}; known: {', '.join(get_args(PlannerKind))}")
        if self.timeout <= 0:
            raise AgentError(f"the agent timeout must be positive, not {self.timeout}")
        if self.max_iterations < 1:
            raise AgentError(f"the agent needs at least one iteration, not {self.max_iterations}")
        if not 0 < self.target_pct <= 100:
            raise AgentError(f"the agent's target must be a % of the floor in (0, 100], not {self.target_pct}")
        if self.step_trials < 1:
            raise AgentError(f"each agent step needs at least one trial, not {self.step_trials}")


def api_key_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """The LLM API key from CUTUNE_LLM_API_KEY or OPENAI_API_KEY, or None when neither is set."""
    env = os.environ if environ is None else environ
    return next((env[name] for name in API_KEY_VARIABLES if env.get(name)), None)
