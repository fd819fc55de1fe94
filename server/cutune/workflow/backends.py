"""Backend choice: a request's BackendChoice as a buildable BackendRef, refused early where it cannot run."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from cutune.errors import CutuneError, NoGpuError
from cutune.gpu.registry import resolve_backend
from cutune.tune.parallel import BackendRef
from cutune.workflow.request import BackendChoice

_RECORDING = "path"  # the constructor keyword of a replaying backend's recording


def backend_ref(choice: BackendChoice) -> BackendRef:
    """How to build the chosen backend, here or in a worker process; a recording it needs and lacks, or
    one that is not there, is an error naming how to give it."""
    cls = resolve_backend(choice.name)
    takes = inspect.signature(cls).parameters
    offered: dict[str, Any] = {_RECORDING: choice.recording, "pace_s": choice.pace_s, "compiler": choice.compiler}
    options = {k: str(v) if isinstance(v, Path) else v for k, v in offered.items() if k in takes and v is not None}
    if _RECORDING in takes:
        if choice.recording is None:
            raise CutuneError(f"the {cls.name} backend replays a recording: name one with {choice.recording_hint}")
        if not choice.recording.is_file():
            raise CutuneError(f"no recording at {choice.recording} ({choice.recording_hint})")
    record = str(choice.record) if choice.record is not None else None
    return BackendRef(cls.name if choice.name == "auto" else choice.name, options, record, choice.isolate)


def unavailable(choice: BackendChoice) -> str | None:
    """Why the chosen backend cannot run on this machine, or None where it can."""
    return resolve_backend(choice.name).unavailable()


def usable_backend(choice: BackendChoice) -> BackendRef:
    """`backend_ref`, refused with NoGpuError where the backend cannot run here."""
    ref = backend_ref(choice)
    why = unavailable(choice)
    if why is not None:
        raise cannot_run(why)
    return ref


def cannot_run(why: str) -> NoGpuError:
    """The error of a backend that cannot run here, saying what can be done instead."""
    return NoGpuError(f"{why}; run `cutune check` for compile-only results")


def recording_of(ref: BackendRef) -> Path | None:
    """The recording the backend replays, or None for one that measures."""
    path = ref.options.get(_RECORDING)
    return Path(path) if path is not None else None
