"""The agent's step log: what each step changed, why, and its measured effect, kept in the study storage.

The log lives in the user attributes of one Optuna study per kernel, device and device-code hash
(`agent:<kernel>@<device>:<hash>:<hash>`), in the same storage as the tuning studies, so a later run
reads it back and resumes: the variants kept so far are rebuilt from their records.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cutune.template.model import TunableParam
from cutune.template.variants.model import Launch, Provenance, Variant
from cutune.tune.study import StudyKey, open_study

STEPS_ATTR = "agent_steps"
STOP_ATTR = "agent_stop"  # how the last run ended: {"stop": MeasuredLoopStop value, "message": words}


class Outcome(enum.Enum):
    """What became of a step's variant."""

    KEPT = "kept"  # correct, and the tuned kernel got faster: it stays in the combined kernel
    NO_GAIN = "no_gain"  # correct, but nothing measurably faster: dropped
    REJECTED = "rejected"  # invalid, did not compile, wrong, faulted or hung: dropped, with the reason
    COMPILE_ONLY = "compile_only"  # compiled and checked with nvcc, not measured (no GPU)


@dataclass(frozen=True)
class StepRecord:
    """One step: the variant tried, who proposed it and why, and what was measured."""

    step: int
    source: str  # "builtin", "openai"
    variant: str  # the variant's name ("" when no variant was proposed)
    change: str  # what changed, in one line
    why: str  # the proposer's reason
    outcome: Outcome
    reason: str = ""  # why it was rejected, or what the fallback was
    pct_of_floor: dict[str, float] = field(default_factory=dict)  # size label → % of the floor (best per size)
    speedup: float | None = None  # geomean over sizes of the tuned kernel against the original
    best: dict[str, Any] = field(default_factory=dict)  # the best configuration
    profile: dict[str, Any] | None = None  # ncu counters of the best configuration (Profile.to_dict)
    registers: int | None = None
    spill_bytes: int | None = None
    seconds: float = 0.0
    variant_data: dict[str, Any] | None = None  # the variant itself, to rebuild it on resume

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = dataclasses.asdict(self)
        data["outcome"] = self.outcome.value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepRecord:
        """The inverse of `to_dict`."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        return cls(**{**values, "outcome": Outcome(data["outcome"])})

    def render(self) -> str:
        """A line or two for people and prompts."""
        text = f"step {self.step} ({self.source}) {self.variant or '-'}: {self.change}; {self.outcome.value}"
        if self.speedup is not None:
            text += f", {self.speedup:.3f}x over the original"
        if self.pct_of_floor:
            text += ", % of floor " + ", ".join(f"{k}: {v:.0f}%" for k, v in self.pct_of_floor.items())
        if self.reason:
            text += f"\n  reason: {self.reason}"
        return text


def render_records(records: Sequence[StepRecord]) -> str:
    """Every step, oldest first; a note when there are none."""
    return "\n".join(r.render() for r in records) or "no steps yet"


def variant_to_dict(variant: Variant) -> dict[str, Any]:
    """A JSON-ready dict of a variant."""
    data = dataclasses.asdict(variant)
    data["params"] = [p.to_json() for p in variant.params]
    return data


def variant_from_dict(data: Mapping[str, Any]) -> Variant:
    """The inverse of `variant_to_dict`."""
    launch = data.get("launch")
    return Variant(
        name=data["name"],
        body=data["body"],
        params=tuple(TunableParam.from_json(p) for p in data.get("params", ())),
        constraints=tuple(data.get("constraints", ())),
        launch=Launch(tuple(launch["grid"]), tuple(launch["block"]), launch.get("shared_mem", "0")) if launch else None,
        helpers=data.get("helpers", ""),
        provenance=Provenance(**data.get("provenance", {"origin": ""})),
        instantiation=tuple((str(p), str(v)) for p, v in data.get("instantiation", ())),
    )


class StepLog:
    """Reads and appends the step log of one kernel's device code on one device, in a study storage."""

    def __init__(self, storage_url: str, *, kernel: str, kernel_hash: str, device: str) -> None:
        key = StudyKey(kernel=f"agent:{kernel}", source_hash=kernel_hash, spec_hash=kernel_hash, device=device)
        self.study = open_study(key, storage_url)

    def records(self) -> list[StepRecord]:
        """The steps recorded so far, oldest first."""
        return [StepRecord.from_dict(d) for d in self.study.user_attrs.get(STEPS_ATTR, [])]

    def stop(self) -> dict[str, str] | None:
        """How the last run ended, if one did."""
        found = self.study.user_attrs.get(STOP_ATTR)
        return dict(found) if found else None

    def finish(self, stop: str, message: str) -> None:
        """Record how this run ended."""
        self.study.set_user_attr(STOP_ATTR, {"stop": stop, "message": message})

    def append(self, record: StepRecord) -> None:
        """Add one step (written to the storage at once)."""
        self.study.set_user_attr(STEPS_ATTR, [*(r.to_dict() for r in self.records()), record.to_dict()])
