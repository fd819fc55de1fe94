"""Speed of light: the device's measured copy bandwidth and empty-launch time, cached per device."""

from __future__ import annotations

import datetime
import json
import os
import re
from dataclasses import asdict, dataclass
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


def measure_speed_of_light(timer: Timer, device: str, driver: str) -> SpeedOfLight:
    """Time a 1 GiB device-to-device copy and an empty kernel (after an L2 flush, as trials are timed)."""
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
    )


def speed_of_light(
    timer: Timer, device: int = 0, *, directory: Path | None = None, refresh: bool = False
) -> SpeedOfLight:
    """The device's speed of light: measured once, then read from the cache (keyed by name and driver)."""
    name = device_limits(device).name
    driver = driver_version()
    path = (directory or cache_dir()) / "sol" / f"{_slug(name)}-driver{driver}.json"
    if not refresh:
        try:
            return SpeedOfLight(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            pass  # absent or unreadable: measure again
    sol = measure_speed_of_light(timer, name, driver)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(sol), indent=1), encoding="utf-8")
    tmp.replace(path)
    return sol


def device_info(timer: Timer, device: int = 0, *, directory: Path | None = None) -> DeviceInfo:
    """The live device's description, limits and speed of light."""
    limits = device_limits(device)
    sol = speed_of_light(timer, device, directory=directory)
    return DeviceInfo(
        name=limits.name,
        arch=limits.arch,
        sm_count=limits.sm_count,
        l2_bytes=limits.l2_bytes,
        copy_bandwidth_gbs=sol.copy_bandwidth_gbs,
        empty_launch_us=sol.empty_launch_us,
        driver=sol.driver,
        limits=limits,
    )


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-") or "device"
