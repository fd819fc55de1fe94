"""The result of tuning one kernel on one device, stored as JSON where the editor reads it."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cutune.errors import StudyError
from cutune.gpu.backend import Timing
from cutune.gpu.replay import ReplaySource
from cutune.template.model import Config
from cutune.tune.dispatch import DispatchPlan
from cutune.tune.geomean import weighted_geomean

FORMAT_VERSION = 1


@dataclass(frozen=True)
class SizeResult:
    """One problem size: the original against what the dispatch launches here, and the single best."""

    size: dict[str, int]
    original: Timing
    tuned: Timing  # what the dispatch launches at this size (the original where no gain was confirmed)
    best_config: Config  # the configuration launched at this size (the original when no gain)
    best_timing: Timing
    significant: bool  # best_config beat the original here in rounds that did not select it
    sol_floor_us: float | None = None  # the speed-of-light floor; None where unknown
    weight: float = 1.0  # in the overall geometric mean
    single: Timing | None = None  # the single best configuration over all sizes, at this size
    held_out: bool = False  # not a spec size: a size between tuned ones that checks the dispatch rule

    @property
    def speedup(self) -> float:
        """Original time / tuned time."""
        return self.original.median_us / self.tuned.median_us

    @property
    def pct_of_sol(self) -> float | None:
        """The tuned time as a percentage of speed of light (100 = at the physical floor)."""
        return None if self.sol_floor_us is None else 100.0 * self.sol_floor_us / self.tuned.median_us

    @property
    def single_speedup(self) -> float | None:
        """Original time / the single best configuration's time here."""
        return None if self.single is None else self.original.median_us / self.single.median_us

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, with the derived numbers for readers."""
        data = dataclasses.asdict(self)
        data["best_config"] = dict(self.best_config)
        data["speedup"] = self.speedup
        data["pct_of_sol"] = self.pct_of_sol
        return data

    @classmethod
    def from_dict(cls, s: dict[str, Any]) -> SizeResult:
        """The inverse of `to_dict`."""
        return cls(
            size=s["size"],
            original=Timing(**s["original"]),
            tuned=Timing(**s["tuned"]),
            best_config=Config.of(s["best_config"]),
            best_timing=Timing(**s["best_timing"]),
            significant=s["significant"],
            sol_floor_us=s["sol_floor_us"],
            weight=s.get("weight", 1.0),
            single=Timing(**s["single"]) if s.get("single") else None,
            held_out=s.get("held_out", False),
        )


@dataclass(frozen=True)
class TuneResult:
    """What tuning found, measured and verified; `best` is the original unless the gain is significant."""

    kernel: str
    source_path: str | None
    source_hash: str  # of the templated source the study measured
    study: str
    device: str
    arch: str
    date: str  # UTC, ISO 8601
    original: Config
    best: Config
    significant: bool
    sizes: tuple[SizeResult, ...]
    trials: int  # configurations measured, over all runs of the study
    failures: dict[str, int] = field(default_factory=dict)  # reason → configurations
    search_seconds: float = 0.0
    stop: str = ""  # why the search ended (a StopReason value)
    sampler: str = ""
    importances: dict[str, float] = field(default_factory=dict)  # parameter → share of the variance
    kernel_hash: str = ""  # of the kernel's device code at the original configuration (cuda.extract.kernel_hash)
    backend: str = ""  # what measured: "cupy", "replay", ...
    replayed: ReplaySource | None = None  # set when the timings were replayed from a recording
    dispatch: DispatchPlan | None = None  # what to launch per size; None when one configuration serves all
    single: Config | None = None  # the single best configuration over all sizes (None: none measured)
    per_file: Config = field(default_factory=lambda: Config.of({}))  # chosen once for the file (compile flags)
    per_file_cost: float = 1.0  # what choosing them once gave up against free per-size picks (≥ 1)
    held_out: tuple[SizeResult, ...] = ()  # sizes between tuned ones, measured to check the dispatch
    held_out_note: str = ""  # why no held-out size was measured, or why the original stands everywhere
    unchecked: tuple[str, ...] = ()  # ranges between tuned sizes that no held-out size checks, in words
    resumed_trials: int = 0  # configurations an earlier run of the study had measured already
    own_trials: int | None = None  # configurations this run measured (None: not recorded, in older results)
    search_estimate: float | None = None  # the search's best speedup, from one measurement per configuration
    rounds: tuple[int, int] = (0, 0)  # selection and confirmation rounds
    checks: str = ""  # the correctness checks beyond the spec sizes (ragged sizes, multiple_of), in words
    # finalists dropped before selection, by stage ("re-check", "sanitizer") → failure class → configurations
    rejected: dict[str, dict[str, int]] = field(default_factory=dict)
    # wall seconds per phase of this run: open, search, re-check, selection, sanitizer, held-out
    phases: dict[str, float] = field(default_factory=dict)
    timing: str = "events"  # how each measurement was timed: "events" (single launches) or "graph"

    @property
    def speedup(self) -> float:
        """Weighted geometric mean over the spec sizes of what the dispatch gains (1.0 where the original stands)."""
        if not self.sizes:
            return 1.0
        return weighted_geomean([s.speedup for s in self.sizes], [s.weight for s in self.sizes])

    @property
    def single_speedup(self) -> float | None:
        """The same figure for the single best configuration launched at every size."""
        values = [s.single_speedup for s in self.sizes]
        if not values or any(v is None for v in values):
            return None
        return weighted_geomean([v for v in values if v is not None], [s.weight for s in self.sizes])

    @property
    def gain_over_single(self) -> float | None:
        """How much faster the per-size dispatch is than the single best configuration (weighted geomean)."""
        single = self.single_speedup
        return None if single is None else self.speedup / single

    def measured_on(self) -> str:
        """`on NVIDIA H200, 2026-11-22`, or `replayed from <recording> (<device>, <date>)`."""
        return self.replayed.label() if self.replayed is not None else f"on {self.device}, {self.date[:10]}"

    def without(self, name: str) -> TuneResult:
        """The result with parameter `name` left out of every configuration it names (a launch feature written
        apart from the configuration, such as PDL)."""

        def drop(config: Config) -> Config:
            return Config.of({k: v for k, v in config.items() if k != name})

        def sized(s: SizeResult) -> SizeResult:
            return dataclasses.replace(s, best_config=drop(s.best_config))

        return dataclasses.replace(
            self,
            original=drop(self.original),
            best=drop(self.best),
            sizes=tuple(sized(s) for s in self.sizes),
            held_out=tuple(sized(s) for s in self.held_out),
            single=drop(self.single) if self.single is not None else None,
            per_file=drop(self.per_file),
            dispatch=self.dispatch.with_configs(drop) if self.dispatch is not None else None,
        )

    def launched(self) -> tuple[Config, ...]:
        """The distinct configurations the result launches (the original where it stands)."""
        return tuple(dict.fromkeys(s.best_config for s in self.sizes))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; derived numbers (speedups, % of speed of light) are included for readers."""
        data = dataclasses.asdict(self)
        data["format"] = FORMAT_VERSION
        data["original"], data["best"] = dict(self.original), dict(self.best)
        data["single"] = dict(self.single) if self.single is not None else None
        data["per_file"] = dict(self.per_file)
        data["dispatch"] = self.dispatch.to_dict() if self.dispatch is not None else None
        data["speedup"] = self.speedup
        data["sizes"] = [s.to_dict() for s in self.sizes]
        data["held_out"] = [s.to_dict() for s in self.held_out]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TuneResult:
        """The inverse of `to_dict`."""
        if data.get("format") != FORMAT_VERSION:
            raise StudyError(f"result format {data.get('format')!r} is not {FORMAT_VERSION}")
        special = {"original", "best", "sizes", "held_out", "single", "per_file", "dispatch", "replayed", "rounds"}
        special.add("unchecked")  # a tuple, stored as a list
        known = {f.name for f in dataclasses.fields(cls)} - special
        replayed = data.get("replayed")
        return cls(
            **{k: v for k, v in data.items() if k in known},
            original=Config.of(data["original"]),
            best=Config.of(data["best"]),
            sizes=tuple(SizeResult.from_dict(s) for s in data["sizes"]),
            held_out=tuple(SizeResult.from_dict(s) for s in data.get("held_out", ())),
            single=Config.of(data["single"]) if data.get("single") is not None else None,
            per_file=Config.of(data.get("per_file") or {}),
            dispatch=DispatchPlan.from_dict(data["dispatch"]) if data.get("dispatch") else None,
            replayed=ReplaySource(**replayed) if replayed else None,
            rounds=tuple(data.get("rounds", (0, 0))),  # type: ignore[arg-type]
            unchecked=tuple(data.get("unchecked", ())),
        )


def result_path(state_dir: Path, source_path: str | None, kernel: str) -> Path:
    """Where a kernel's result is stored: `<state_dir>/results/<file-stem>.<kernel>.json`."""
    stem = Path(source_path).stem if source_path else "untitled"
    return state_dir / "results" / f"{stem}.{kernel}.json"


def write_result(result: TuneResult, path: Path) -> None:
    """Write `result` as JSON, atomically (an editor may be reading the file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(result.to_dict(), indent=2) + "\n", encoding="utf-8")
    os.replace(partial, path)


def read_result(path: Path) -> TuneResult:
    """Read a result written by `write_result`."""
    try:
        return TuneResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise StudyError(f"cannot read tuning result {path}: {e}") from e
