"""The capture log: the distinct launches a program made, one JSON line each, after a header line.

The recorder (`inject/cutune_intercept.py`) writes one such file per process; `merge_parts` joins them into
the log a capture keeps, which `read_log` reads back (also in tests, with no GPU).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cutune.errors import CutuneError

FORMAT = "cutune-capture"
VERSION = 1


class CaptureError(CutuneError):
    """A capture could not run, its log is unreadable, or what it saw contradicts the spec."""


@dataclass(frozen=True)
class Param:
    """One kernel parameter as launched: where it sits, its bytes, and for a device pointer the bytes left in
    its allocation (the smallest seen over the launches counted together)."""

    offset: int
    size: int
    raw: bytes
    extent: int | None = None

    @property
    def is_pointer(self) -> bool:
        return self.extent is not None


@dataclass(frozen=True)
class Snapshot:
    """Where `--data` stored a problem's buffers: parameter index → (file, bytes), under the data folder."""

    folder: str
    files: dict[int, tuple[str, int]]
    cap: int


@dataclass(frozen=True)
class LoggedLaunch:
    """A distinct launch (kernel, geometry, scalar bytes) and how many times it happened."""

    name: str  # the mangled name, as the driver knows it
    api: str  # the launch call that made it, e.g. "cuLaunchKernel", "__cudaLaunchKernel"
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    params: tuple[Param, ...] | None  # None: the layout could not be read (`why` says why)
    count: int
    why: str | None = None
    data: Snapshot | None = None

    def key(self) -> tuple[Any, ...]:
        """What makes launches the same problem: pointers count by position, not address."""
        params = None if self.params is None else tuple("ptr" if p.is_pointer else p.raw for p in self.params)
        return (self.name, self.grid, self.block, self.smem, params)


@dataclass(frozen=True)
class CaptureLog:
    """A whole capture: where and when it ran, and every distinct launch."""

    launches: tuple[LoggedLaunch, ...]
    device: str = ""
    date: str = ""
    command: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    path: str | None = None
    data_dir: str | None = None  # the folder `--data` snapshots are under
    failed: tuple[str, ...] = field(default_factory=tuple)  # processes whose recorder could not start


def read_log(path: str | os.PathLike[str]) -> CaptureLog:
    """Read a capture log; raises CaptureError naming the file and line of what is wrong."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise CaptureError(f"{path}: cannot read the capture log: {e}") from None
    if not lines:
        raise CaptureError(f"{path}: empty capture log")
    rows = []
    for i, line in enumerate(lines, 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise CaptureError(f"{path}:{i}: not JSON: {e.msg}") from None
    header, entries = rows[0], rows[1:]
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CaptureError(f"{path}:1: not a cutune capture log (no `format: {FORMAT}` header)")
    launches = []
    for i, entry in enumerate(entries, 2):
        try:
            launches.append(_launch(entry))
        except (KeyError, TypeError, ValueError) as e:
            raise CaptureError(f"{path}:{i}: malformed launch record ({type(e).__name__}: {e})") from None
    return CaptureLog(
        launches=tuple(launches),
        device=str(header.get("device", "")),
        date=str(header.get("date", "")),
        command=tuple(header.get("command") or header.get("argv") or ()),
        errors=tuple(header.get("errors", ())),
        path=str(path),
        data_dir=header.get("data_dir"),
        failed=tuple(header.get("failed_processes") or ()),
    )


def _launch(entry: dict[str, Any]) -> LoggedLaunch:
    params = entry.get("params")
    data = entry.get("data")
    return LoggedLaunch(
        name=str(entry["name"]),
        api=str(entry.get("api", "")),
        grid=_dim3(entry["grid"]),
        block=_dim3(entry["block"]),
        smem=int(entry.get("smem", 0)),
        params=None
        if params is None
        else tuple(Param(int(p["offset"]), int(p["size"]), bytes.fromhex(p["hex"]), p.get("extent")) for p in params),
        count=int(entry.get("count", 1)),
        why=entry.get("why"),
        data=None
        if not data
        else Snapshot(
            str(data["dir"]),
            {int(k): (str(v["file"]), int(v["bytes"])) for k, v in data["files"].items()},
            int(data["cap"]),
        ),
    )


def _dim3(value: Sequence[int]) -> tuple[int, int, int]:
    dims = [int(v) for v in value][:3]
    return (*dims, 1, 1, 1)[:3]  # type: ignore[return-value]


def launch_json(launch: LoggedLaunch) -> dict[str, Any]:
    """A launch as its log line holds it."""
    out: dict[str, Any] = {
        "name": launch.name,
        "api": launch.api,
        "grid": list(launch.grid),
        "block": list(launch.block),
        "smem": launch.smem,
        "params": None
        if launch.params is None
        else [{"offset": p.offset, "size": p.size, "hex": p.raw.hex(), "extent": p.extent} for p in launch.params],
        "count": launch.count,
    }
    if launch.why:
        out["why"] = launch.why
    if launch.data is not None:
        files = {str(i): {"file": f, "bytes": n} for i, (f, n) in launch.data.files.items()}
        out["data"] = {"dir": launch.data.folder, "files": files, "cap": launch.data.cap}
    return out


def write_log(path: str | os.PathLike[str], log: CaptureLog) -> None:
    """Write a capture log (atomically: a reader never sees half of it)."""
    header = {
        "format": FORMAT,
        "version": VERSION,
        "device": log.device,
        "date": log.date,
        "command": list(log.command),
        "errors": list(log.errors),
        "data_dir": log.data_dir,
        "failed_processes": list(log.failed),
    }
    tmp = Path(f"{path}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(json.dumps(header) + "\n")
        for launch in log.launches:
            f.write(json.dumps(launch_json(launch)) + "\n")
    os.replace(tmp, path)


def merge_parts(parts: Iterable[Path], *, command: Sequence[str], data_dir: str | None) -> CaptureLog:
    """One log from the per-process files: the same launch in two processes counts once with both counts."""
    merged: dict[tuple[Any, ...], LoggedLaunch] = {}
    errors: list[str] = []
    failed: list[str] = []
    device = date = ""
    for part in sorted(parts):
        try:
            log = read_log(part)
        except CaptureError as e:  # a process killed mid-write leaves a `.tmp`, never a torn part: report others
            errors.append(str(e))
            continue
        header = json.loads(part.read_text(encoding="utf-8").splitlines()[0])
        if header.get("failed"):
            failed.extend(log.errors)
            continue
        errors.extend(log.errors)
        device, date = device or log.device, date or log.date
        for launch in log.launches:
            kept = merged.get(launch.key())
            merged[launch.key()] = launch if kept is None else _joined(kept, launch)
    return CaptureLog(
        tuple(merged.values()), device, date, tuple(command), tuple(errors), data_dir=data_dir, failed=tuple(failed)
    )


def _joined(a: LoggedLaunch, b: LoggedLaunch) -> LoggedLaunch:
    params = a.params
    if a.params is not None and b.params is not None:
        params = tuple(
            Param(
                p.offset,
                p.size,
                p.raw,
                min(p.extent, q.extent) if p.extent is not None and q.extent is not None else p.extent,
            )
            for p, q in zip(a.params, b.params, strict=True)
        )
    return LoggedLaunch(a.name, a.api, a.grid, a.block, a.smem, params, a.count + b.count, a.why, a.data or b.data)
