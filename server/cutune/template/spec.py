"""The tuning spec: how to run a kernel (arguments, launch, problem sizes, tolerances, space)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from cutune.template.model import Space


class Role(enum.Enum):
    IN = "in"
    OUT = "out"
    INOUT = "inout"


class Init(enum.Enum):
    NORMAL = "normal"  # standard normal, scaled by `scale`
    UNIFORM = "uniform"  # uniform in [low, high)
    RANDINT = "randint"  # integers in [low, high)
    ARANGE = "arange"  # 0, 1, 2, ... (indices; still never all zeros)


DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32", "uint32", "int64")


@dataclass(frozen=True)
class ArgSpec:
    """One kernel argument: an array (shape set) or a scalar (value set)."""

    name: str
    dtype: str
    role: Role = Role.IN
    shape: tuple[str, ...] | None = None  # element counts per dimension, as expressions; None for a scalar
    value: str | None = None  # a scalar's value, as an expression
    init: Init = Init.NORMAL
    low: float = -1.0
    high: float = 1.0
    scale: float = 1.0
    line: int | None = None  # where it is written in the spec file (1-based)

    @property
    def is_array(self) -> bool:
        return self.shape is not None


@dataclass(frozen=True)
class Tolerance:
    """Allowed difference from the reference: |out - ref| <= atol + rtol * |ref|."""

    rtol: float
    atol: float


@dataclass(frozen=True)
class KernelSpec:
    """Everything needed to run, check and time one kernel."""

    kernel: str
    args: tuple[ArgSpec, ...]
    sizes: tuple[dict[str, int], ...]  # problem sizes: variable name → value
    grid: tuple[str, ...]  # 1–3 expressions over sizes and parameters
    block: tuple[str, ...]
    shared_mem: str = "0"
    template_args: dict[str, str] = field(default_factory=dict)  # fixed template args, e.g. {"T": "half"}
    space: Space | None = None  # tunable parameters; None: take the templatize recipes' space
    tolerance: Tolerance | None = None  # None: derived from the output dtypes
    reference: str = "original"
    bytes_moved: str | None = None  # expression; None: derived from the array arguments
    flags: tuple[str, ...] = ()
    defines: dict[str, str] = field(default_factory=dict)
    include_dirs: tuple[str, ...] = ()
    path: str | None = None
