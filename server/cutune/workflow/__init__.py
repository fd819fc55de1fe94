"""cutune.workflow: the use cases the front ends call (autotune, the agent, apply), each assembled once."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cutune.workflow.agent import agent_autotune
    from cutune.workflow.apply import AppliedResult, apply_result, apply_to_source, result_is_current
    from cutune.workflow.autotuning import Autotuned, Prepared, autotune, prepare, run_prepared
    from cutune.workflow.backends import backend_ref, unavailable, usable_backend
    from cutune.workflow.request import AgentRequest, BackendChoice, Hooks, TuneRequest
    from cutune.workflow.variants import variant_names, variants_of, with_combined

# name → module: imported when first asked for, so that a command showing variants or applying a result does not
# load the agent, the search and Optuna with the package (no name is also a module's: an imported submodule would
# stand in its place)
_EXPORTS = {
    "agent_autotune": "agent",
    "AppliedResult": "apply",
    "apply_result": "apply",
    "apply_to_source": "apply",
    "result_is_current": "apply",
    "Autotuned": "autotuning",
    "Prepared": "autotuning",
    "autotune": "autotuning",
    "prepare": "autotuning",
    "run_prepared": "autotuning",
    "backend_ref": "backends",
    "unavailable": "backends",
    "usable_backend": "backends",
    "AgentRequest": "request",
    "BackendChoice": "request",
    "Hooks": "request",
    "TuneRequest": "request",
    "variant_names": "variants",
    "variants_of": "variants",
    "with_combined": "variants",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'cutune.workflow' has no attribute {name!r}")
    return getattr(importlib.import_module(f"cutune.workflow.{_EXPORTS[name]}"), name)


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
