"""What a study is for and how it is run, stored in the study so that a worker on any host needs nothing else.

The plan (the job: templated source, spec and space; the budget; the search options; the liveness
settings; the device it is measured on) is one JSON study attribute: readable by people browsing the
storage, and never code — nothing from a shared database is unpickled.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna

from cutune.errors import StudyError
from cutune.gpu.backend import DeviceInfo, Job
from cutune.tune.options import Budget, Liveness, SearchOptions, TuneOptions

PLAN = "cutune:plan"  # study user attribute


@dataclass(frozen=True)
class StudyPlan:
    """Everything a worker needs to join a study."""

    job: Job
    budget: Budget
    search: SearchOptions
    liveness: Liveness
    device: str  # the GPU's name
    driver: str  # the CUDA version its driver supports

    def refusal(self, device: DeviceInfo) -> str | None:
        """Why a worker on `device` must not join (its timings would not compare), or None."""
        if (device.name, device.driver) == (self.device, self.driver):
            return None
        return (
            f"this worker's GPU ({device.name}, driver {device.driver or '?'}) differs from the study's "
            f"({self.device}, driver {self.driver or '?'}): their timings do not compare"
        )


def plan_for(job: Job, device: DeviceInfo, options: TuneOptions) -> StudyPlan:
    """The plan of a run of `job` on `device` with `options`."""
    return StudyPlan(job, options.budget, options.search, options.liveness, device.name, device.driver)


def write_plan(study: optuna.Study, plan: StudyPlan) -> None:
    """Store the plan in the study (the run that starts or resumes a study states it)."""
    study.set_user_attr(PLAN, to_json(plan))


def read_plan(study: optuna.Study) -> StudyPlan:
    """The plan stored in a study; a StudyError when it has none or cannot be read."""
    data = study.user_attrs.get(PLAN)
    if data is None:
        raise StudyError(f"study {study.study_name} holds no cutune plan; start it with `cutune tune`")
    try:
        return from_json(StudyPlan, data)
    except (KeyError, TypeError, ValueError) as e:
        raise StudyError(f"study {study.study_name}: its plan is unreadable ({e}); another cutune version?") from e


def to_json(value: Any) -> Any:
    """Dataclasses, enums, tuples and dicts as JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [to_json(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


def from_json(tp: Any, data: Any) -> Any:
    """The inverse of `to_json`, guided by the type `tp` (a dataclass, enum, tuple, dict, union, primitive)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        names = {f.name for f in dataclasses.fields(tp) if f.init}
        return tp(**{k: from_json(hints[k], v) for k, v in data.items() if k in names})
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(data)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_json(args[0], v) for v in data)
        return tuple(from_json(a, v) for a, v in zip(args, data, strict=True))
    if origin in (dict, Mapping):
        return {k: from_json(args[1], v) for k, v in data.items()}
    if origin in (typing.Union, types.UnionType):
        if data is None:
            return None
        structured = [a for a in args if dataclasses.is_dataclass(a) or typing.get_origin(a) is not None]
        if isinstance(data, dict | list) and len(structured) == 1:
            return from_json(structured[0], data)
        return data  # a union of primitives (int | bool | str): JSON keeps which one it is
    if tp is float and isinstance(data, int):
        return float(data)
    return data
