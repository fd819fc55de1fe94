"""cutune.workflow: the use cases the front ends call (autotune, the agent, apply), each assembled once."""

from cutune.workflow.agent import agent_autotune
from cutune.workflow.apply import AppliedResult, apply_result, apply_to_source, result_is_current
from cutune.workflow.autotune import Autotuned, Prepared, autotune, prepare, run_prepared
from cutune.workflow.backends import backend_ref, unavailable, usable_backend
from cutune.workflow.request import AgentRequest, BackendChoice, Hooks, TuneRequest
from cutune.workflow.variants import variant_names, variants_of, with_combined

__all__ = [
    "AgentRequest",
    "AppliedResult",
    "Autotuned",
    "BackendChoice",
    "Hooks",
    "Prepared",
    "TuneRequest",
    "agent_autotune",
    "apply_result",
    "apply_to_source",
    "autotune",
    "backend_ref",
    "prepare",
    "result_is_current",
    "run_prepared",
    "unavailable",
    "usable_backend",
    "variant_names",
    "variants_of",
    "with_combined",
]
