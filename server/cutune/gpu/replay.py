"""Recorded measurements: a JSON-lines recorder around any backend, and a backend that replays them.

A recording is one header line (device, speed of light, date, hashes of the source and spec) followed
by one line per measurement, each flushed as it is written so that a killed process keeps every
finished trial. Replaying needs no GPU: tests of the search and the editor run on recordings.

The spec is compared in a canonical form: what decides the measurements (arguments, launch, template
arguments, tolerance, compile options, space), never comments, layout or check-only keys (`multiple_of`,
size weights). Format 1 recordings stored a hash of the spec file's text instead; they are still read.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import os
import random
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from cutune.errors import CutuneError
from cutune.gpu.backend import Backend, Capability, Check, DeviceInfo, Failure, Job, Measurement
from cutune.gpu.clock import WALL, Clock, VirtualClock
from cutune.source_file import text_hash
from cutune.spec import KernelSpec, parse_spec
from cutune.template.model import Config, Space

if TYPE_CHECKING:
    from cutune.gpu.profile import Profile

FORMAT = 2  # 1: `spec_sha256` hashed the spec file's text; 2: its canonical form, kept in `spec` too
_HISTORY_COMMITS = 200  # how far back a format 1 recording's spec text is looked for in git
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
    # how the recording was matched to the spec: "spec" (canonical form), "text" (a format 1 recording of
    # this very text) or "earlier text" (of this spec in git, differing in comments/check-only keys only)
    matched: str = "spec"
    note: str = ""  # for "earlier text": which commit, and that only comments/check-only keys differ

    def label(self) -> str:
        """`replayed from silu.tune.jsonl (NVIDIA H200, 2026-11-21)`, and the note where there is one."""
        label = f"replayed from {Path(self.recording).name} ({self.device}, {self.date[:10]})"
        return f"{label}; {self.note}" if self.note else label


def replay_source(backend: Backend) -> ReplaySource | None:
    """The recording a backend replays (through a recorder around it too); None for a measuring one."""
    inner = backend.inner if isinstance(backend, RecordingBackend) else backend
    return inner.source if isinstance(inner, ReplayBackend) else None


def clock_of(backend: Backend) -> Clock:
    """The clock a run on `backend` reads its budget and phase times from: a replay's virtual one, else the wall."""
    inner = backend.inner if isinstance(backend, RecordingBackend) else backend
    return inner.clock if isinstance(inner, ReplayBackend) else WALL


def measuring_name(backend: Backend) -> str:
    """The name of the backend that produces the timings (not of a recorder around it)."""
    inner = backend.inner if isinstance(backend, RecordingBackend) else backend
    return getattr(inner, "backend", inner.name) if inner.name == "isolated" else inner.name


@dataclass(frozen=True)
class Agreement:
    """Whether a recording stands for a job: `why` not (None when it does), and how its spec matched."""

    why: str | None
    matched: str = "spec"
    note: str = ""


def agreement(recording: Recording, job: Job) -> Agreement:
    """Whether a recording stands for `job` (kernel, space, source, sizes, spec), and how its spec matched."""
    header = recording.header
    if header.get("kernel") != job.template.kernel:
        return Agreement(f"it records kernel {header.get('kernel')!r}, not {job.template.kernel!r}")
    recorded_params = header.get("params", {})
    params = {p.name: list(p.values) for p in job.space.params}
    if recorded_params != params:
        changed = sorted(set(recorded_params) ^ set(params)) or sorted(
            k for k in params if recorded_params.get(k) != params[k]
        )
        return Agreement(f"the tuning space differs (parameters {', '.join(changed)})")
    recorded_mode = header.get("timing", {}).get("mode", "events")  # recordings before graph timing: events
    if recorded_mode != job.timing.mode:
        return Agreement(f"it was timed with {recorded_mode} timing, not {job.timing.mode}")
    if header.get("source_sha256") != text_hash(job.template.source):
        where = header.get("source_path") or "the recorded file"
        return Agreement(f"the kernel's source changed since it was recorded from {where}")
    recorded_sizes = {_sizes_key([t.size]) for m in recording.measurements for t in m.timings}
    missing = [s for s in job.spec.sizes if _sizes_key([s]) not in recorded_sizes]
    if missing:
        return Agreement(f"size {', '.join(f'{k}={v}' for k, v in missing[0].items())} was not recorded")
    return _spec_agreement(header, job.spec)


def _spec_agreement(header: Mapping[str, Any], spec: KernelSpec) -> Agreement:
    stored = str(header.get("spec_sha256", ""))
    form = canonical_spec(spec)
    if stored == _digest(form):
        return Agreement(None)
    changed = "the tuning spec changed since it was recorded"
    if header.get("format", 1) >= 2:
        return Agreement(f"{changed}: {_differences(header.get('spec', {}), form)}")
    # format 1 stored the hash of the spec file's text: this text, or an earlier one kept in git
    text = _read(spec.path)
    if text is not None and text_hash(text) == stored:
        return Agreement(None, matched="text")
    earlier = _earlier_text(spec.path, stored) if spec.path else None
    if earlier is None:
        return Agreement(
            f"{changed} (a format 1 recording keeps only a hash of the spec file's text, and neither this text "
            "nor an earlier one in its git history matches it)"
        )
    commit, old_text = earlier
    try:
        old_form = canonical_spec(parse_spec(old_text, spec.path).kernel(spec.kernel))
    except CutuneError as e:
        return Agreement(f"{changed}; its text of commit {commit} no longer reads: {e}")
    if old_form != form:
        return Agreement(f"{changed} (its text of commit {commit}): {_differences(old_form, form)}")
    note = f"recorded with an earlier text of this spec (commit {commit}); only comments/check-only keys differ"
    return Agreement(None, matched="earlier text", note=note)


def canonical_spec(spec: KernelSpec) -> dict[str, Any]:
    """What of a kernel's spec decides its measurements, as JSON data.

    Left out: comments and layout (never parsed), line numbers, the spec's path, and what only the checks
    or the report use (`multiple_of`, size weights, `bytes_moved`). The sizes are left out too: a
    recording is checked size by size, so one recording serves the tuned and the held-out sizes.
    """
    base = Path(spec.path).resolve().parent if spec.path else None
    tolerance = spec.effective_tolerance()  # a tolerance written as its default measures the same
    return {
        "kernel": spec.kernel,
        "args": [
            {
                "name": a.name,
                "dtype": a.dtype,
                "role": a.role.value,
                "shape": list(a.shape) if a.shape is not None else None,
                "value": a.value,
                "init": a.init.value,
                "low": a.low,
                "high": a.high,
                "scale": a.scale,
            }
            for a in spec.args
        ],
        "grid": list(spec.grid),
        "block": list(spec.block),
        "shared_mem": spec.shared_mem,
        "template_args": dict(sorted(spec.template_args.items())),
        "tolerance": {"rtol": tolerance.rtol, "atol": tolerance.atol},
        "reference": spec.reference,
        "flags": list(spec.flags),
        "defines": dict(sorted(spec.defines.items())),
        # relative to the spec: the same checkout measures the same wherever it sits
        "include_dirs": [os.path.relpath(d, base) if base else d for d in spec.include_dirs],
        "includes": {"drop": list(spec.includes.drop), "substitute": dict(sorted(spec.includes.substitute.items()))},
        "constraints": list(spec.constraints),
        "space": _canonical_space(spec.space),
    }


def _canonical_space(space: Space | None) -> dict[str, Any] | None:
    if space is None:
        return None
    params = {
        p.name: {
            "values": list(p.values),
            "default": p.default,
            "binding": p.binding.value,
            "flag": p.flag,
            "arg": p.arg,
        }
        for p in space.params  # descriptions are documentation
    }
    return {"params": params, "constraints": list(space.constraints)}


def _differences(old: Any, new: Any) -> str:
    """The keys whose values differ, e.g. `args[1].scale, tolerance.rtol`."""
    found: list[str] = []

    def walk(a: Any, b: Any, at: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in [*a, *(k for k in b if k not in a)]:
                walk(a.get(k), b.get(k), f"{at}.{k}" if at else str(k))
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{at}[{i}]")
        elif a != b:
            found.append(at or "the whole spec")

    walk(old, new, "")
    return ", ".join(found) if found else "nothing that decides measurements (its hash differs)"


def _earlier_text(path: str, sha256: str) -> tuple[str, str] | None:
    """The short commit and text of an earlier version of `path` in git whose text has this hash."""
    folder, name = os.path.split(os.path.abspath(path))
    log_ = _git(folder, "log", f"--max-count={_HISTORY_COMMITS}", "--format=%H", "--", name)
    for commit in (log_ or "").split():
        text = _git(folder, "show", f"{commit}:./{name}")
        if text is not None and text_hash(text) == sha256:
            return commit[:12], text
    return None


def _git(folder: str, *args: str) -> str | None:
    """Git's output (newlines as Python reads text files), or None where git or the repository is absent."""
    try:
        done = subprocess.run(["git", *args], cwd=folder, capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    try:
        return done.stdout.decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError:
        return None


def _read(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


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
        "source_sha256": text_hash(job.template.source),
        "spec_sha256": _digest(canonical_spec(job.spec)),
        "spec": canonical_spec(job.spec),  # to say what changed, should the spec change
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

    def evaluate(self, config: Config, at: Sequence[int] | None = None) -> Measurement:
        """Evaluate with the inner backend and record the result."""
        measurement = self.inner.evaluate(config, at)
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

    def can(self, capability: Capability) -> bool:
        """What the recorded backend declares."""
        return self.inner.can(capability)

    def profile(self, job: Job, config: Config) -> Profile | None:
        """The recorded backend's profile (not recorded: counters are not timings)."""
        return self.inner.profile(job, config)

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
    test noise-aware selection. `pace_s` makes each evaluation take that long, as a real one would: it
    sleeps, and advances the backend's virtual `clock` by as much, from which a replayed run reads its
    budget and phase times, so that a replay decides the same whatever the host's speed.
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
        self.clock = VirtualClock()
        self._records: dict[tuple[str, SizesKey | None], list[Measurement]] = {}
        self._served: dict[str, int] = {}
        self._sizes: SizesKey = ()

    def open(self, job: Job) -> DeviceInfo:
        """Load the recording, check that it stands for this job, and describe the device it was made on."""
        recording = read_recording(self.path)
        agreed = agreement(recording, job)
        if agreed.why is not None:
            message = f"{self.path}: this recording does not match {job.template.kernel}: {agreed.why}; record it again"
            if self.strict:
                raise CutuneError(message)
            log.warning(message)
        elif agreed.matched != "spec":
            log.info("%s: %s", self.path, agreed.note or "a format 1 recording of this spec's text")
        self._records = {}
        self._served = {}
        self._sizes = _sizes_key(job.spec.sizes)
        for m in recording.measurements:
            sizes = _sizes_key([t.size for t in m.timings]) if m.timings else None
            self._records.setdefault((m.config.key(), sizes), []).append(m)
        device = recording.device
        date = str(recording.header.get("date", ""))
        self.source = ReplaySource(str(self.path), device.name, date, agreed.matched, agreed.note)
        return device

    def evaluate(self, config: Config, at: Sequence[int] | None = None) -> Measurement:
        """The next recording of `config` at the job's sizes (those `at` names), with noise if asked for; a
        recording at every size serves the sizes `at` names where none was made at those alone."""
        if self.pace_s > 0:
            time.sleep(self.pace_s)
            self.clock.advance(self.pace_s)
        key = config.key()
        sizes = self._sizes if at is None else tuple(self._sizes[i] for i in at)
        found = self._records.get((key, sizes)) or self._records.get((key, None))
        pick = None
        if not found and at is not None:
            found, pick = self._records.get((key, self._sizes)), at
        if not found and not self.strict:  # a sweep replayed onto another job: any sizes will do
            found = next((v for (k, _), v in self._records.items() if k == key), None)
        if not found:
            return Measurement(config, failure=Failure.INFEASIBLE, detail="not recorded")
        served = f"{key}@{sizes}"
        n = self._served.get(served, 0)
        self._served[served] = n + 1
        measurement = replace(found[n % len(found)], config=config)
        if pick is not None and len(measurement.timings) == len(self._sizes):  # made at every size of this job
            measurement = replace(measurement, timings=tuple(measurement.timings[i] for i in pick))
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


def _digest(form: Mapping[str, Any]) -> str:
    return text_hash(json.dumps(form, sort_keys=True, separators=(",", ":")))
