"""Templates: a kernel source with explicit parameters, the space of their values, and constraints."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

Value = int | bool | str
# the parameter of programmatic dependent launch: besides its binding, true launches the kernel with the
# programmatic-stream-serialization attribute (template/recipes/pdl.py)
PDL = "PDL"


class Binding(enum.Enum):
    """How a parameter's value reaches the compiler."""

    TEMPLATE = "template"  # a non-type template argument of the kernel, by name
    SPECIALIZE = "specialize"  # bool: template argument = the problem's value of `arg` when true, else 0
    FLAG = "flag"  # a compile flag: bool → present/absent; int → `flag` formatted with the value, 0 = off
    DEFINE = "define"  # -DNAME=value
    LAUNCH = "launch"  # used only in the spec's launch expressions (e.g. a block-size cap); no recompile


@dataclass(frozen=True, slots=True)
class TunableParam:
    """One explicit parameter: its candidate values and its default (the original choice)."""

    name: str
    values: tuple[Value, ...]
    default: Value
    binding: Binding = Binding.TEMPLATE
    flag: str | None = None  # for FLAG: e.g. "--use_fast_math" or "-maxrregcount={}"
    arg: str | None = None  # for SPECIALIZE: the runtime argument (and problem-size variable) it fixes
    description: str = ""
    # a structural variant's own parameter whose default leaves the kernel as written (row_cache's 0 rounds): the
    # value the search measures the variant at first, so a short search does not spend its one try of the variant
    # on the original's code (None: the default)
    try_first: Value | None = None

    def to_json(self) -> dict[str, Any]:
        """The parameter as a JSON-ready dict (`from_json` reads it back)."""
        data = dataclasses.asdict(self)
        data["values"] = list(self.values)
        data["binding"] = self.binding.value
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TunableParam:
        """A parameter `to_json` wrote (the keys after `default` may be missing: older records)."""
        return cls(
            name=data["name"],
            values=tuple(data["values"]),
            default=data["default"],
            binding=Binding(data.get("binding", Binding.TEMPLATE.value)),
            flag=data.get("flag"),
            arg=data.get("arg"),
            description=data.get("description", ""),
            try_first=data.get("try_first"),
        )


@dataclass(frozen=True)
class Config(Mapping[str, Value]):
    """A frozen, hashable assignment of values to parameters."""

    items_: tuple[tuple[str, Value], ...]

    @classmethod
    def of(cls, values: Mapping[str, Value]) -> Config:
        """A Config from any mapping (order-independent)."""
        return cls(tuple(sorted(values.items())))

    def __getitem__(self, key: str) -> Value:
        for k, v in self.items_:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self.items_)

    def __len__(self) -> int:
        return len(self.items_)

    def __str__(self) -> str:
        return ", ".join(f"{k}={_fmt(v)}" for k, v in self.items_) or "(defaults)"

    def key(self) -> str:
        """A stable string key, e.g. for caches and study attributes."""
        return ";".join(f"{k}={_fmt(v)}" for k, v in self.items_)


def _fmt(v: Value) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


@dataclass(frozen=True)
class Space:
    """The parameters of a template and the constraints every configuration must meet."""

    params: tuple[TunableParam, ...]
    constraints: tuple[str, ...] = ()

    def default(self) -> Config:
        """The original configuration."""
        return Config.of({p.name: p.default for p in self.params})

    def size(self) -> int:
        """The number of points before constraints."""
        n = 1
        for p in self.params:
            n *= len(p.values)
        return n

    def varying(self, name: str) -> Space:
        """The space with every parameter but `name` fixed at its default (e.g. to compile each of its values)."""
        return Space(
            tuple(p if p.name == name else dataclasses.replace(p, values=(p.default,)) for p in self.params),
            self.constraints,
        )

    def param(self, name: str) -> TunableParam:
        """The parameter called `name`."""
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


@dataclass(frozen=True)
class Refusal:
    """A recipe that did not apply, and why."""

    recipe: str
    reason: str


@dataclass(frozen=True)
class Template:
    """A rewritten source in which one kernel's choices are explicit parameters."""

    kernel: str
    source: str  # the whole rewritten file; at the space's defaults it behaves as the original
    space: Space
    applied: tuple[str, ...] = ()  # names of the recipes that changed something
    refused: tuple[Refusal, ...] = field(default=())
