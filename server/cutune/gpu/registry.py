"""The measuring backends by name, and how to build one (isolated in a worker where it needs it)."""

from __future__ import annotations

import importlib
import os
from typing import Any

from cutune.errors import CutuneError
from cutune.gpu.backend import Backend, Capability
from cutune.gpu.cupy_backend import CupyBackend
from cutune.gpu.replay import RecordingBackend, ReplayBackend
from cutune.gpu.worker import IsolatedBackend

# CupyBackend imports CuPy only when it is opened, so this registry (and cutune) imports without it.
BACKENDS: dict[str, type[Backend]] = {
    CupyBackend.name: CupyBackend,
    ReplayBackend.name: ReplayBackend,
}


AUTO = "auto"  # the first registered backend that measures


def resolve_backend(ref: str) -> type[Backend]:
    """A backend class from its registry name, a `package.module:Class` import path, or `auto`."""
    if ref == AUTO:
        return next(cls for cls in BACKENDS.values() if Capability.MEASURE in cls.capabilities)
    if ref in BACKENDS:
        return BACKENDS[ref]
    module, _, attr = ref.partition(":")
    if attr:
        try:
            found = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise CutuneError(f"cannot import backend {ref!r}: {e}") from None
        if isinstance(found, type) and issubclass(found, Backend):
            return found
        raise CutuneError(f"{ref!r} is not a Backend subclass")
    raise CutuneError(f"unknown backend {ref!r}; known: {', '.join(BACKENDS)} (or a module:Class path)")


def create_backend(
    ref: str, *, isolate: bool | None = None, record: str | os.PathLike[str] | None = None, **options: Any
) -> Backend:
    """Build a backend: in a worker process if it can fault or hang (or `isolate` says so), recorded
    to `record` (JSON lines) if given. `options` go to the backend's constructor."""
    cls = resolve_backend(ref)
    isolated = cls.needs_isolation if isolate is None else isolate
    backend: Backend = IsolatedBackend(ref, options=options) if isolated else cls(**options)
    return RecordingBackend(backend, record) if record is not None else backend
