"""cutune.tune: the Optuna search over a template's space, noise-aware selection and the result."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cutune.tune.options import Budget, SearchOptions, SelectionOptions, TuneOptions
    from cutune.tune.result import SizeResult, TuneResult, read_result, result_path, write_result
    from cutune.tune.run import stored_result_path, tune
    from cutune.tune.samplers import NAMES as SAMPLER_NAMES
    from cutune.tune.search import Progress, ProgressFn, SearchOutcome, StopReason, run_search
    from cutune.tune.select import Selection, Verdict, shortlist
    from cutune.tune.space import Feasibility, distributions, feasible_configs
    from cutune.tune.study import StudyKey, open_study, study_key

# name → (module, attribute): imported when first asked for, so that `cutune.tune.options` (read by commands that
# never search) does not load Optuna and the search with the package; no name is also a module's (an imported
# submodule would stand in its place): `select` is imported from `cutune.tune.select`
_EXPORTS = {
    "Budget": ("options", "Budget"),
    "SearchOptions": ("options", "SearchOptions"),
    "SelectionOptions": ("options", "SelectionOptions"),
    "TuneOptions": ("options", "TuneOptions"),
    "SizeResult": ("result", "SizeResult"),
    "TuneResult": ("result", "TuneResult"),
    "read_result": ("result", "read_result"),
    "result_path": ("result", "result_path"),
    "write_result": ("result", "write_result"),
    "stored_result_path": ("run", "stored_result_path"),
    "tune": ("run", "tune"),
    "SAMPLER_NAMES": ("samplers", "NAMES"),
    "Progress": ("search", "Progress"),
    "ProgressFn": ("search", "ProgressFn"),
    "SearchOutcome": ("search", "SearchOutcome"),
    "StopReason": ("search", "StopReason"),
    "run_search": ("search", "run_search"),
    "Selection": ("select", "Selection"),
    "Verdict": ("select", "Verdict"),
    "shortlist": ("select", "shortlist"),
    "Feasibility": ("space", "Feasibility"),
    "distributions": ("space", "distributions"),
    "feasible_configs": ("space", "feasible_configs"),
    "StudyKey": ("study", "StudyKey"),
    "open_study": ("study", "open_study"),
    "study_key": ("study", "study_key"),
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'cutune.tune' has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    return getattr(importlib.import_module(f"cutune.tune.{module}"), attribute)


__all__ = [
    "SAMPLER_NAMES",
    "Budget",
    "Feasibility",
    "Progress",
    "ProgressFn",
    "SearchOptions",
    "SearchOutcome",
    "Selection",
    "SelectionOptions",
    "SizeResult",
    "StopReason",
    "StudyKey",
    "TuneOptions",
    "TuneResult",
    "Verdict",
    "distributions",
    "feasible_configs",
    "open_study",
    "read_result",
    "result_path",
    "run_search",
    "shortlist",
    "stored_result_path",
    "study_key",
    "tune",
    "write_result",
]
