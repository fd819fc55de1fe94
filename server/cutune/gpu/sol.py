"""Speed of light: the device's measured copy bandwidth and empty-launch time, cached per device."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from cutune.gpu.backend import DeviceInfo, TimingOptions
from cutune.gpu.device import device_limits, driver_version
from cutune.gpu.harness import Timer, summarize

COPY_BYTES = 1 << 30  # large enough that launch and tail effects vanish
_COPY_TIMING = TimingOptions(warmup=2, reps=20, min_time_ms=0.0, flush_l2=False)
_EMPTY_SOURCE = 'extern "C" __global__ void cutune_empty() {}'


@dataclass(frozen=True)
class SpeedOfLight:
    """What one device does at best: copy bandwidth (bytes read + written) and an empty launch."""

    device: str
    driver: str
    copy_bandwidth_gbs: float
    empty_launch_us: float
    measured: str  # ISO date and time
    graph_launch_us: float = 0.0  # an empty kernel per launch under graph timing; 0: not measured yet


def sol_floor_us(bytes_moved: int, info: DeviceInfo) -> float:
    """The fastest a kernel moving `bytes_moved` bytes can run on this device, in microseconds."""
    if info.copy_bandwidth_gbs <= 0:
        return info.empty_launch_us
    return bytes_moved / (info.copy_bandwidth_gbs * 1e3) + info.empty_launch_us


def cache_dir() -> Path:
    """Where cutune keeps per-machine measurements: $CUTUNE_CACHE_DIR, else the user's cache folder."""
    if env := os.environ.get("CUTUNE_CACHE_DIR"):
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cutune"


def measure_speed_of_light(timer: Timer, device: str, driver: str, *, graph: bool = False) -> SpeedOfLight:
    """Time a 1 GiB device-to-device copy and an empty kernel (after an L2 flush, as trials are timed), and
    with `graph` the empty kernel under graph timing too."""
    import cupy

    src = cupy.empty(COPY_BYTES, dtype=cupy.uint8)
    dst = cupy.empty_like(src)
    src.fill(1)

    def copy() -> None:
        dst.data.copy_from_device_async(src.data, COPY_BYTES)

    copy_us, _, _ = summarize(timer.time(copy, _COPY_TIMING))
    empty = cupy.RawKernel(_EMPTY_SOURCE, "cutune_empty")
    launch_us, _, _ = summarize(timer.time(lambda: empty((1,), (1,), ()), TimingOptions()))
    return SpeedOfLight(
        device=device,
        driver=driver,
        copy_bandwidth_gbs=2 * COPY_BYTES / copy_us / 1e3,
        empty_launch_us=launch_us,
        measured=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        graph_launch_us=graph_launch_us(timer) if graph else 0.0,
    )


def graph_launch_us(timer: Timer) -> float:
    """An empty kernel's time per launch under graph timing: the floor of a kernel timed that way."""
    import cupy

    empty = cupy.RawKernel(_EMPTY_SOURCE, "cutune_empty")
    per_launch, _, _ = summarize(timer.time_graph([lambda: empty((1,), (1,), ())], TimingOptions(mode="graph")))
    return per_launch


def speed_of_light(
    timer: Timer, device: int = 0, *, directory: Path | None = None, refresh: bool = False, graph: bool = False
) -> SpeedOfLight:
    """The device's speed of light: measured once, then read from the cache (keyed by name and driver); with
    `graph`, the graph-timed empty launch too (measured the first time it is asked for)."""
    name = device_limits(device).name
    driver = driver_version()
    path = (directory or cache_dir()) / "sol" / f"{_slug(name)}-driver{driver}.json"
    sol: SpeedOfLight | None = None
    if not refresh:
        with contextlib.suppress(OSError, ValueError, TypeError):  # absent or unreadable: measure again
            sol = SpeedOfLight(**json.loads(path.read_text(encoding="utf-8")))
    if sol is not None and (sol.graph_launch_us > 0 or not graph):
        return sol
    # a cache without the graph floor (none was asked for yet): only that is measured
    if sol is not None:
        sol = replace(sol, graph_launch_us=graph_launch_us(timer))
    else:
        sol = measure_speed_of_light(timer, name, driver, graph=graph)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(sol), indent=1), encoding="utf-8")
    tmp.replace(path)
    return sol


def device_info(
    timer: Timer, device: int = 0, *, directory: Path | None = None, graph: bool = False, measure: bool = True
) -> DeviceInfo:
    """The live device's description, limits and speed of light (its empty launch timed in a graph, with
    `graph`, as graph timing times every kernel); without `measure`, no speed of light (zero: unknown)."""
    limits = device_limits(device)
    if not measure:
        # a tool's child process (ncu, compute-sanitizer) serialises and instruments every launch: what it would
        # time is the tool, and cached it would poison every later floor on this machine
        sol = SpeedOfLight(limits.name, driver_version(), 0.0, 0.0, "", 0.0)
    else:
        sol = speed_of_light(timer, device, directory=directory, graph=graph)
    return DeviceInfo(
        name=limits.name,
        arch=limits.arch,
        sm_count=limits.sm_count,
        l2_bytes=limits.l2_bytes,
        copy_bandwidth_gbs=sol.copy_bandwidth_gbs,
        empty_launch_us=sol.graph_launch_us if graph else sol.empty_launch_us,
        driver=sol.driver,
        limits=limits,
    )


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-") or "device"
