"""What a front end asks of a use case: typed, frozen requests, and the hooks it listens with."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cutune.agent.record import StepRecord
from cutune.agent.settings import AgentSettings
from cutune.agent.steps import LoopOptions
from cutune.gpu.backend import TimingOptions
from cutune.tune.options import Liveness
from cutune.tune.search import ProgressFn


@dataclass(frozen=True)
class BackendChoice:
    """Which backend measures (a registry name, `module:Class`, or `auto`) and what it is built with.

    Each option reaches the backends whose constructors take it: `recording` as `path` (a replaying
    backend's recording), `pace_s`, `compiler`. `recording_hint` says how the user names a recording
    (`--replay FILE`, a setting), for the error when one is needed.
    """

    name: str = "auto"
    recording: Path | None = None
    pace_s: float = 0.0
    compiler: str = "auto"
    record: Path | None = None  # append every measurement to this recording
    isolate: bool | None = None  # measure in a worker process; None: where the backend can fault or hang
    recording_hint: str = "--replay FILE"


@dataclass(frozen=True)
class TuneRequest:
    """One autotune: budget, sampler, storage, variants, backend, timing and the last checks."""

    trials: int = 200
    seconds: float | None = 600.0  # the whole run: search, selection, checks, held-out sizes
    search_seconds: float | None = None  # the search alone, within `seconds`
    sampler: str = "auto"
    probe: bool = True  # rounds around the best configuration so far between the sampler's turns
    storage_url: str | None = None  # None: the journal in the workspace's .cutune/
    variants: bool | None = None  # None: on, and when replaying, where the recording's space has VARIANT
    backend: BackendChoice = field(default_factory=BackendChoice)
    timing: TimingOptions = field(default_factory=TimingOptions)
    sanitize: bool | None = None  # None: where compute-sanitizer is on PATH
    liveness: Liveness = field(default_factory=Liveness)
    devices: tuple[int, ...] | None = None  # several GPUs: one worker each, on one study


@dataclass(frozen=True)
class AgentRequest:
    """One run of the measured agent loop: where its variants come from, how long it runs, what measures."""

    source: AgentSettings
    loop: LoopOptions
    storage_url: str | None = None
    backend: BackendChoice = field(default_factory=BackendChoice)


@dataclass(frozen=True)
class Hooks:
    """How a front end follows a use case: progress, a cancel flag, notices, the agent's steps."""

    progress: ProgressFn | None = None
    cancel: threading.Event | None = None
    notice: Callable[[str], None] | None = None
    on_step: Callable[[StepRecord], None] | None = None
