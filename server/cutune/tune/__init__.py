"""cutune.tune: the Optuna search over a template's space, noise-aware selection and the result."""

from cutune.tune.options import Budget, SearchOptions, SelectionOptions, TuneOptions
from cutune.tune.result import SizeResult, TuneResult, read_result, result_path, write_result
from cutune.tune.run import stored_result_path, tune
from cutune.tune.samplers import NAMES as SAMPLER_NAMES
from cutune.tune.search import Progress, ProgressFn, SearchOutcome, StopReason, run_search
from cutune.tune.select import Selection, Verdict, select, shortlist
from cutune.tune.space import Feasibility, distributions, feasible_configs
from cutune.tune.study import StudyKey, open_study, study_key

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
    "select",
    "shortlist",
    "stored_result_path",
    "study_key",
    "tune",
    "write_result",
]
