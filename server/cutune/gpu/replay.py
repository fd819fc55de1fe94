"""Recorded measurements: a JSON-lines recorder around any backend, and a backend that replays them.

A recording is one header line (device, speed of light, date, hashes of the source and spec) followed
by one line per measurement, each flushed as it is written so that a killed process keeps every
finished trial. Replaying needs no GPU: tests of the search and the editor run on recordings.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import math
import os
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import IO, Any

from cutune.errors import CutuneError
from cutune.gpu.backend import Backend, Check, DeviceInfo, Failure, Job, Measurement
from cutune.template.model import Config

FORMAT = 1
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recording:
    """A recording file's header and its measurements, in the order they were made."""

    header: dict[str, Any]
    measurements: tuple[Measurement, ...]

    @property
    def device(self) -> DeviceInfo:
        return DeviceInfo.from_dict(self.header["device"])


@dataclass(frozen=True)
class ReplaySource:
    """Where replayed timings came from: the recording, and the device and date it was made on."""

    recording: str
    device: str
    date: str

    def label(self) -> str:
        """`replayed from silu.tune.jsonl (NVIDIA H200, 2026-11-21)`."""
        return f"replayed from {Path(self.recording).name} ({self.device}, {self.date[:10]})"


def replay_source(backend: Backend) -> ReplaySource | None:
    """The recording a backend replays (through a recorder around it too); None for a measuring one."""
    inner = backend.inner if isinstance(backend, RecordingBackend) else backend
    return inner.source if isinstance(inner, ReplayBackend) else None


def measuring_name(backend: Backend) -> str:
    """The name of the backend that produces the timings (not of a recorder around it)."""
    inner = backend.inner if isinstance(backend, RecordingBackend) else backend
    return getattr(inner, "backend", inner.name) if inner.name == "isolated" else inner.name


def mismatch(recording: Recording, job: Job) -> str | None:
    """Why a recording cannot stand for `job`'s measurements, or None when it can."""
    header = recording.header
    if header.get("kernel") != job.template.kernel:
        return f"it records kernel {header.get('kernel')!r}, not {job.template.kernel!r}"
    recorded_params = header.get("params", {})
    params = {p.name: list(p.values) for p in job.space.params}
    if recorded_params != params:
        changed = sorted(set(recorded_params) ^ set(params)) or sorted(
            k for k in params if recorded_params.get(k) != params[k]
        )
        return f"the tuning space differs (parameters {', '.join(changed)})"
    hashes = job_hashes(job)
    if header.get("source_sha256") != hashes["source_sha256"]:
        where = header.get("source_path") or "the recorded file"
        return f"the kernel's source changed since it was recorded from {where}"
    recorded_sizes = {_sizes_key([t.size]) for m in recording.measurements for t in m.timings}
    missing = [s for s in job.spec.sizes if _sizes_key([s]) not in recorded_sizes]
    if missing:
        return f"size {', '.join(f'{k}={v}' for k, v in missing[0].items())} was not recorded"
    if header.get("spec_sha256") != hashes["spec_sha256"]:
        return "the tuning spec changed since it was recorded (arguments, launch, tolerance or sizes)"
    return None


def job_hashes(job: Job) -> dict[str, str]:
    """SHA-256 of the template source and of the spec (its file's text where it has one)."""
    spec_text = repr(replace(job.spec, sizes=(), weights=()))  # sizes are checked one by one
    if job.spec.path and Path(job.spec.path).is_file():
        spec_text = Path(job.spec.path).read_text(encoding="utf-8")
    return {"source_sha256": _sha256(job.template.source), "spec_sha256": _sha256(spec_text)}


def header_for(job: Job, info: DeviceInfo) -> dict[str, Any]:
    """The header line of a recording of `job` on `info`'s device."""
    return {
        "type": "header",
        "format": FORMAT,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "kernel": job.template.kernel,
        "source_path": job.source_path,
        "device": info.to_dict(),
        "timing": asdict(job.timing),
        "params": {p.name: list(p.values) for p in job.space.params},
        **job_hashes(job),
    }


def read_recording(path: str | os.PathLike[str]) -> Recording:
    """Read a recording; an unfinished last line (the recorder was killed mid-write) is skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise CutuneError(f"{path}: cannot read the recording: {e}") from None
    header: dict[str, Any] | None = None
    found: list[Measurement] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError:
            if number == len(lines):
                break
            raise CutuneError(f"{path}:{number}: not a JSON line") from None
        if data.get("type") == "header":
            header = header or data  # appended sessions repeat the header; the first one describes them
        elif data.get("type") == "measurement":
            found.append(Measurement.from_dict(data))
    if header is None:
        raise CutuneError(f"{path}: no header line; is this a cutune recording?")
    return Recording(header, tuple(found))


class RecordingBackend(Backend):
    """Wraps a backend and appends every measurement to a JSON-lines file as it is made."""

    name = "recording"

    def __init__(self, inner: Backend, path: str | os.PathLike[str], *, append: bool = False) -> None:
        self.inner = inner
        self.path = Path(path)
        self.append = append
        self._started = False
        self._file: IO[str] | None = None

    def open(self, job: Job) -> DeviceInfo:
        """Open the inner backend and start the file (or continue it, with `append`)."""
        info = self.inner.open(job)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # a second job in the same run (e.g. the held-out sizes) continues the file
        self._file = self.path.open("a" if self.append or self._started else "w", encoding="utf-8")
        self._started = True
        self._write(header_for(job, info))
        return info

    def evaluate(self, config: Config) -> Measurement:
        """Evaluate with the inner backend and record the result."""
        measurement = self.inner.evaluate(config)
        self._write({"type": "measurement", **measurement.to_dict()})
        return measurement

    def prefetch(self, configs: Sequence[Config]) -> None:
        self.inner.prefetch(configs)

    def verify(self, config: Config, seed: int) -> Check | None:
        """The inner backend's re-check (a recorder must not skip it: it times nothing new)."""
        return self.inner.verify(config, seed)

    def sanitize(self, configs: Sequence[Config]) -> tuple[Check, ...] | None:
        """The inner backend's compute-sanitizer run."""
        return self.inner.sanitize(configs)

    @property
    def healthy(self) -> bool:
        return self.inner.healthy

    def close(self) -> None:
        self.inner.close()
        if self._file:
            self._file.close()
            self._file = None

    def _write(self, data: dict[str, Any]) -> None:
        if self._file is None:
            raise CutuneError("the recording backend is not open")
        self._file.write(json.dumps(data, allow_nan=True) + "\n")
        self._file.flush()


class ReplayBackend(Backend):
    """Serves recorded measurements without a GPU.

    A recording that does not match the job (kernel, space, source, sizes, spec) is refused with the
    reason, unless `strict` is False (tests that replay a timing sweep onto another job). Measurements
    are served by configuration and by the job's sizes (a recording may hold several jobs' sizes, e.g.
    the held-out ones); a configuration measured several times is served its recordings in turn.
    Configurations that were not recorded fail as INFEASIBLE ("not recorded"). `noise` (e.g. 0.03)
    multiplies every timing by a seeded log-normal factor, deterministic per configuration and call, to
    test noise-aware selection. `pace_s` makes each evaluation take that long, as a real one would.
    """

    name = "replay"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        noise: float = 0.0,
        seed: int = 0,
        strict: bool = True,
        pace_s: float = 0.0,
    ) -> None:
        self.path = Path(path)
        self.pace_s = pace_s
        self.noise = noise
        self.seed = seed
        self.strict = strict
        self.source: ReplaySource | None = None  # set by `open`
        self._records: dict[tuple[str, SizesKey | None], list[Measurement]] = {}
        self._served: dict[str, int] = {}
        self._sizes: SizesKey = ()

    def open(self, job: Job) -> DeviceInfo:
        """Load the recording, check that it stands for this job, and describe the device it was made on."""
        recording = read_recording(self.path)
        why = mismatch(recording, job)
        if why is not None:
            message = f"{self.path}: this recording does not match {job.template.kernel}: {why}; record it again"
            if self.strict:
                raise CutuneError(message)
            log.warning(message)
        self._records = {}
        self._served = {}
        self._sizes = _sizes_key(job.spec.sizes)
        for m in recording.measurements:
            sizes = _sizes_key([t.size for t in m.timings]) if m.timings else None
            self._records.setdefault((m.config.key(), sizes), []).append(m)
        device = recording.device
        self.source = ReplaySource(str(self.path), device.name, str(recording.header.get("date", "")))
        return device

    def evaluate(self, config: Config) -> Measurement:
        """The next recording of `config` at the job's sizes, with noise if asked for."""
        if self.pace_s > 0:
            time.sleep(self.pace_s)
        key = config.key()
        found = self._records.get((key, self._sizes)) or self._records.get((key, None))
        if not found and not self.strict:  # a sweep replayed onto another job: any sizes will do
            found = next((v for (k, _), v in self._records.items() if k == key), None)
        if not found:
            return Measurement(config, failure=Failure.INFEASIBLE, detail="not recorded")
        served = f"{key}@{self._sizes}"
        n = self._served.get(served, 0)
        self._served[served] = n + 1
        measurement = replace(found[n % len(found)], config=config)
        if self.noise <= 0 or not measurement.timings:
            return measurement
        rng = random.Random(f"{self.seed}:{key}:{n}")
        timings = []
        for t in measurement.timings:
            factor = math.exp(self.noise * rng.gauss(0.0, 1.0))
            timings.append(
                replace(t, median_us=t.median_us * factor, p10_us=t.p10_us * factor, p90_us=t.p90_us * factor)
            )
        return replace(measurement, timings=tuple(timings))


SizesKey = tuple[tuple[tuple[str, int], ...], ...]


def _sizes_key(sizes: Sequence[Mapping[str, int]]) -> SizesKey:
    return tuple(tuple(sorted(s.items())) for s in sizes)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
