"""The server's settings: dataclasses with defaults, read from camelCase JSON with cattrs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NewType

import cattrs
from cattrs.errors import ClassValidationError
from cattrs.gen import make_dict_structure_fn, override

from cutune.agent.settings import AgentSettings
from cutune.errors import CutuneError

BackendName = Literal["auto", "cupy", "replay"]
LogLevel = Literal["error", "warning", "info", "debug"]
TimingName = Literal["events", "graph"]  # cutune.gpu.backend.TIMING_MODES
PositiveInt = NewType("PositiveInt", int)
PositiveFloat = NewType("PositiveFloat", float)


@dataclass(frozen=True)
class BudgetSettings:
    """How much one autotune job may spend."""

    trials: PositiveInt = PositiveInt(200)
    seconds: PositiveFloat = PositiveFloat(600.0)


@dataclass(frozen=True)
class CaptureSettings:
    """What "Capture launches…" runs: a command that launches the workspace's kernels as the application does."""

    command: str = ""  # a shell-style command line, e.g. `python -m pytest tests/test_ops.py`
    data: bool = False  # also keep each captured problem's input buffers


@dataclass(frozen=True)
class Settings:
    """Everything the editor can set (section `cutune`); see docs/protocol.md."""

    agent: AgentSettings = field(default_factory=AgentSettings)
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    capture: CaptureSettings = field(default_factory=CaptureSettings)
    arch: str = "sm_90"
    storage_url: str = ""
    backend: BackendName = "auto"
    replay_file: str = ""
    replay_pace: float = 0.0  # seconds each replayed measurement takes (demos, tests); 0: at once
    # autotune searches the structural variants too (replaying: where the recording's space has VARIANT)
    variants: bool = True
    # how each measurement is timed: single launches with events, or CUDA graphs of back-to-back launches
    timing: TimingName = "events"
    log_level: LogLevel = "info"


def camel(name: str) -> str:
    """`storage_url` → `storageUrl`."""
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def _exact(kind: type) -> Any:
    # cattrs' defaults coerce (`str(5)`, `int("7")`, `int(True)`); a setting of the wrong JSON type is
    # a mistake the user should hear about, not a value to guess
    def structure(value: object, _: type) -> object:
        numeric = kind in (int, float) and not isinstance(value, bool)
        if isinstance(value, kind) or (kind is float and numeric and isinstance(value, int)):
            return kind(value)
        raise ValueError(f"expected {kind.__name__}, got {value!r}")

    return structure


def _positive(kind: type) -> Any:
    check = _exact(kind)

    def structure(value: object, target: type) -> object:
        number = check(value, target)
        if number <= 0:
            raise ValueError(f"must be positive, got {number!r}")
        return number

    return structure


def _renames(cls: type) -> dict[str, Any]:
    """cattrs overrides that read each field of a settings dataclass from its camelCase key."""
    return {f.name: override(rename=camel(f.name)) for f in dataclasses.fields(cls)}


def _converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=False)
    for kind in (str, int, float, bool):
        conv.register_structure_hook(kind, _exact(kind))
    conv.register_structure_hook(PositiveInt, _positive(int))
    conv.register_structure_hook(PositiveFloat, _positive(float))
    conv.register_structure_hook_factory(
        dataclasses.is_dataclass,
        lambda cls: make_dict_structure_fn(cls, conv, **_renames(cls)),
    )
    return conv


_CONVERTER = _converter()


def parse_settings(raw: object) -> tuple[Settings, tuple[str, ...]]:
    """Settings from the editor's JSON, and the dotted camelCase keys that were invalid (defaults used)."""
    if raw is None:
        return Settings(), ()
    if not isinstance(raw, Mapping):
        return Settings(), ("cutune",)
    data: dict[str, Any] = _copy(raw)
    invalid: list[str] = []
    while True:
        try:
            return _CONVERTER.structure(data, Settings), tuple(invalid)
        except (ClassValidationError, CutuneError, TypeError, ValueError) as e:
            bad = _failing_paths(e, ()) or [()]
            if () in bad:  # nothing left to drop: give up on the whole object
                return Settings(), (*invalid, "cutune")
            for path in bad:
                _drop(data, path)
                invalid.append(".".join(camel(p) for p in path))


def _copy(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _copy(v) if isinstance(v, Mapping) else v for k, v in raw.items()}


def _failing_paths(error: BaseException, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The attribute paths whose values failed, from cattrs' nested validation errors."""
    if not isinstance(error, ClassValidationError):
        return [path]
    with_notes, without = error.group_exceptions()
    found = [p for sub, note in with_notes for p in _failing_paths(sub, (*path, note.name))]
    return found + ([path] if without else [])


def _drop(data: dict[str, Any], path: tuple[str, ...]) -> None:
    *parents, last = path
    for name in parents:
        data = data.get(camel(name), {})
    data.pop(camel(last), None)
