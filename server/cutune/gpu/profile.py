"""Nsight Compute counters of one configuration: `ncu` runs a small launcher that evaluates it once.

The launcher (`python -m cutune.gpu.profile JOB`) opens the backend named in JOB (one declaring
Capability.PROFILE) on a job cut to one problem size and evaluates the configuration once; ncu profiles
every launch of the kernel and the last one (the configuration's own timed launch; the reference runs
first) is read from its `--csv --page raw` table. ncu's own process isolates the run: a fault or hang
ends that process, never the caller.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import pickle
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cutune.errors import CutuneError
from cutune.gpu.backend import Capability, Job, TimingOptions
from cutune.template.model import Config

DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
L2_HIT = "lts__t_sector_hit_rate.pct"
REGISTERS = "launch__registers_per_thread"
DURATION = "gpu__time_duration.sum"
# issue slots busy and warp instructions executed: an issue-bound kernel (index math, divisions) shows a high share
# with DRAM well below its peak. Asked for by regex: a name the installed ncu lacks is then absent, not an error.
ISSUE = "smsp__issue_active.avg.pct_of_peak_sustained_active"
INSTRUCTIONS = "smsp__inst_executed.sum"
# the Warp State Statistics section's per-reason stall ratios: warps stalled per issued instruction
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
METRICS = (
    DRAM,
    OCCUPANCY,
    L2_HIT,
    REGISTERS,
    DURATION,
    *(f"regex:^{name.replace('.', '[.]')}$" for name in (ISSUE, INSTRUCTIONS)),
    f"regex:^{STALL_PREFIX}.*{STALL_SUFFIX.replace('.', '[.]')}$",
)
TOP_STALLS = 3
# what a launch is bound by, from its share of DRAM bandwidth and of issue slots (measured on H200s, 2026-11-28:
# streaming kernels near the floor show DRAM 80-90%; llama.cpp's quantize_q8_1, issue-bound, 78-90% of issue
# slots with DRAM at 15-27%; its flat-row cache write, latency-bound, DRAM 50% with issue 56%)
MEMORY_BOUND_PCT = 75.0
ISSUE_BOUND_PCT = 70.0
LATENCY_BOUND_PCT = 60.0  # below it, issue slots and DRAM alike
TIMEOUT_S = 300.0  # ncu replays each launch once per counter pass: tens of passes


class ProfileError(CutuneError):
    """ncu is missing, failed, or profiled no launch of the kernel."""


@dataclass(frozen=True)
class Profile:
    """Hardware counters of one launch of one configuration at one problem size."""

    config: Config
    size: dict[str, int]
    dram_pct: float | None  # achieved DRAM throughput, % of peak
    occupancy_pct: float | None  # achieved occupancy: active warps, % of the SM's maximum
    l2_hit_pct: float | None
    registers: int | None
    duration_us: float | None
    stalls: tuple[tuple[str, float], ...] = ()  # the top stall reasons, warps per issued instruction, largest first
    issue_pct: float | None = None  # issue slots busy, % of peak
    instructions: float | None = None  # warp instructions executed

    def bound(self) -> str | None:
        """What limits the launch, read from the counters: memory, instruction issue or latency (None: unclear)."""
        if self.dram_pct is not None and self.dram_pct >= MEMORY_BOUND_PCT:
            return "memory-bound: DRAM near its peak, only fewer bytes moved would pay"
        if self.dram_pct is None or self.issue_pct is None:
            return None
        if self.issue_pct >= ISSUE_BOUND_PCT:
            return (
                "instruction-bound: issue slots busy, DRAM well below its peak; fewer instructions per element pay "
                "(more elements per thread, 32-bit indices, cheaper math)"
            )
        if self.issue_pct < LATENCY_BOUND_PCT and self.dram_pct < LATENCY_BOUND_PCT:
            return "latency-bound: neither DRAM nor issue busy; more bytes in flight per thread or more warps pay"
        return None

    def render(self) -> str:
        """One line for logs, prompts and the editor."""
        parts = [
            _pct("DRAM throughput", self.dram_pct),
            _pct("achieved occupancy", self.occupancy_pct),
            _pct("L2 hit rate", self.l2_hit_pct),
            f"{self.registers} registers/thread" if self.registers is not None else "registers ?",
        ]
        if self.issue_pct is not None:
            parts.append(_pct("issue slots busy", self.issue_pct))
        if self.stalls:
            parts.append("top stalls " + ", ".join(f"{name} {value:.2f}" for name, value in self.stalls))
        if (bound := self.bound()) is not None:
            parts.append(bound)
        size = " ".join(f"{k}={v}" for k, v in self.size.items())
        return f"ncu at {size}: " + "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (study attributes, the editor)."""
        data = dataclasses.asdict(self)
        data["config"] = dict(self.config)
        data["stalls"] = [list(s) for s in self.stalls]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Profile:
        """The inverse of `to_dict`."""
        values = {**data, "config": Config.of(data["config"]), "size": dict(data["size"])}
        values["stalls"] = tuple((str(n), float(v)) for n, v in data.get("stalls", ()))
        return cls(**values)


def profile_config(
    job: Job,
    config: Config,
    *,
    backend: str,
    options: Mapping[str, Any],
    size_index: int = -1,
    ncu: str = "ncu",
    timeout_s: float = TIMEOUT_S,
) -> Profile:
    """Run `config` of `job` once at one problem size (default: the last) under ncu and read its counters;
    the launcher builds `backend` (a registry name declaring Capability.PROFILE) from `options`."""
    exe = shutil.which(ncu)
    if exe is None:
        raise ProfileError(f"Nsight Compute (`{ncu}`) is not on PATH: no hardware counters")
    if not job.spec.sizes:
        raise ProfileError(f"{job.template.kernel}: the spec has no problem sizes to profile")
    size = job.spec.sizes[size_index]
    one = dataclasses.replace(
        job,
        spec=dataclasses.replace(job.spec, sizes=(size,)),
        timing=TimingOptions(warmup=0, reps=1, min_time_ms=0.0, max_reps=1, flush_l2=False),
    )
    with tempfile.TemporaryDirectory(prefix="cutune-ncu-") as tmp:
        path = Path(tmp) / "job.pickle"
        path.write_bytes(pickle.dumps((one, config, backend, dict(options))))
        command = ncu_command(exe, job.template.kernel, [sys.executable, "-m", "cutune.gpu.profile", str(path)])
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise ProfileError(f"ncu did not finish within {timeout_s:g} s profiling {config}") from None
    if done.returncode != 0:
        raise ProfileError(f"ncu failed (exit {done.returncode}) profiling {config}: {failure_text(done)}")
    metrics = parse_ncu_csv(done.stdout, job.template.kernel)
    return Profile(
        config=config,
        size=dict(size),
        dram_pct=metrics.get(DRAM),
        occupancy_pct=metrics.get(OCCUPANCY),
        l2_hit_pct=metrics.get(L2_HIT),
        registers=int(metrics[REGISTERS]) if REGISTERS in metrics else None,
        duration_us=_us(metrics.get(DURATION)),
        stalls=top_stalls(metrics),
        issue_pct=metrics.get(ISSUE),
        instructions=metrics.get(INSTRUCTIONS),
    )


def ncu_command(ncu: str, kernel: str, program: Sequence[str]) -> list[str]:
    """The ncu command line profiling every launch of `kernel` by `program`, as a raw CSV table on stdout."""
    return [
        ncu,
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--kernel-name",
        f"regex:\\b{kernel}\\b",
        "--metrics",
        ",".join(METRICS),
        *program,
    ]


def failure_text(done: subprocess.CompletedProcess[str]) -> str:
    """What a failed ncu run said: its own and the launcher's messages (not the CSV table it may have printed)."""
    text = f"{done.stdout}\n{done.stderr}"
    said = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith('"')]
    said = [line for line in said if not line.startswith("==PROF==")] or [text.strip()[-800:] or "no output"]
    return " | ".join(said)[-800:]


def parse_ncu_csv(text: str, kernel: str) -> dict[str, float]:
    """The numeric metrics of the last profiled launch in ncu's raw CSV (header row, units row, launches)."""
    start = text.find('"ID"')
    if start < 0:
        raise ProfileError(f"ncu profiled no launch of {kernel}: {text.strip()[-400:] or 'no output'}")
    rows = [r for r in csv.reader(io.StringIO(text[start:])) if r]
    header, launches = rows[0], [r for r in rows[1:] if r and r[0].strip().isdigit()]
    if not launches:
        raise ProfileError(f"ncu profiled no launch of {kernel}")
    last = launches[-1]
    metrics = {}
    for name, value in zip(header, last, strict=False):
        number = _number(value)
        if number is not None and ("__" in name):
            metrics[name] = number
    return metrics


def top_stalls(metrics: Mapping[str, float], n: int = TOP_STALLS) -> tuple[tuple[str, float], ...]:
    """The `n` largest stall reasons (name without the metric's prefix and suffix), largest first."""
    stalls = [
        (name[len(STALL_PREFIX) : -len(STALL_SUFFIX)], value)
        for name, value in metrics.items()
        if name.startswith(STALL_PREFIX) and name.endswith(STALL_SUFFIX) and "not_issued" not in name
    ]
    return tuple(sorted(stalls, key=lambda s: -s[1])[:n])


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _us(ns: float | None) -> float | None:
    return None if ns is None else ns / 1000.0  # base units: gpu__time_duration is in nanoseconds


def _pct(label: str, value: float | None) -> str:
    return f"{label} {value:.1f}%" if value is not None else f"{label} ?"


def _launch(path: str) -> int:
    """The launcher ncu runs: evaluate the pickled configuration once on the pickled backend."""
    from cutune.gpu.registry import resolve_backend

    job, config, name, options = pickle.loads(Path(path).read_bytes())
    cls = resolve_backend(name)
    if Capability.PROFILE not in cls.capabilities:
        print(f"the {name} backend cannot be profiled: it runs no kernels", file=sys.stderr)
        return 1
    # under the tool every launch is serialised and instrumented: no speed of light is measured (nor cached) here
    backend = cls(**{**options, "speed_of_light": False})
    backend.open(job)
    try:
        measurement = backend.evaluate(config)
    finally:
        backend.close()
    if not measurement.ok:
        print(f"{config}: {measurement.failure}: {measurement.detail}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_launch(sys.argv[1]))
