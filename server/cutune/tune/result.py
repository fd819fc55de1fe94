"""The result of tuning one kernel on one device, stored as JSON where the editor reads it."""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cutune.errors import StudyError
from cutune.gpu.backend import Timing
from cutune.template.model import Config

FORMAT_VERSION = 1


@dataclass(frozen=True)
class SizeResult:
    """One problem size: the original against the tuned configuration, and the best for this size."""

    size: dict[str, int]
    original: Timing
    tuned: Timing  # the overall best configuration at this size (the original when there is no gain)
    best_config: Config  # the fastest configuration at this size alone (the original when no gain)
    best_timing: Timing
    significant: bool  # best_config beats the original here by more than the spread
    sol_floor_us: float | None = None  # the speed-of-light floor; None where unknown

    @property
    def speedup(self) -> float:
        """Original time / tuned time."""
        return self.original.median_us / self.tuned.median_us

    @property
    def pct_of_sol(self) -> float | None:
        """The tuned time as a percentage of speed of light (100 = at the physical floor)."""
        return None if self.sol_floor_us is None else 100.0 * self.sol_floor_us / self.tuned.median_us


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

    @property
    def speedup(self) -> float:
        """Geometric mean over sizes of the speedup (1.0 when the original stands)."""
        return statistics.geometric_mean(s.speedup for s in self.sizes) if self.sizes else 1.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; derived numbers (speedups, % of speed of light) are included for readers."""
        data = dataclasses.asdict(self)
        data["format"] = FORMAT_VERSION
        data["original"], data["best"] = dict(self.original), dict(self.best)
        data["speedup"] = self.speedup
        for entry, size in zip(data["sizes"], self.sizes, strict=True):
            entry["best_config"] = dict(size.best_config)
            entry["speedup"] = size.speedup
            entry["pct_of_sol"] = size.pct_of_sol
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TuneResult:
        """The inverse of `to_dict`."""
        if data.get("format") != FORMAT_VERSION:
            raise StudyError(f"result format {data.get('format')!r} is not {FORMAT_VERSION}")
        sizes = tuple(
            SizeResult(
                size=s["size"],
                original=Timing(**s["original"]),
                tuned=Timing(**s["tuned"]),
                best_config=Config.of(s["best_config"]),
                best_timing=Timing(**s["best_timing"]),
                significant=s["significant"],
                sol_floor_us=s["sol_floor_us"],
            )
            for s in data["sizes"]
        )
        known = {f.name for f in dataclasses.fields(cls)} - {"original", "best", "sizes"}
        return cls(
            **{k: v for k, v in data.items() if k in known},
            original=Config.of(data["original"]),
            best=Config.of(data["best"]),
            sizes=sizes,
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
