"""The tuning spec: how to run a kernel (arguments, launch, problem sizes, tolerances, space)."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cutune.errors import ExpressionError, SpecError
from cutune.template.dtypes import DTYPES, INTEGER_DTYPES, dtype_size
from cutune.template.expr import Number, compile_expr
from cutune.template.model import Space, Value

__all__ = [
    "DTYPES",
    "ArgSpec",
    "IncludeRules",
    "Init",
    "KernelSpec",
    "Role",
    "SpecFile",
    "Tolerance",
    "default_tolerance",
]

Dim3 = tuple[int, int, int]


class Role(enum.Enum):
    IN = "in"
    OUT = "out"
    INOUT = "inout"


class Init(enum.Enum):
    NORMAL = "normal"  # standard normal, scaled by `scale`
    UNIFORM = "uniform"  # uniform in [low, high)
    RANDINT = "randint"  # integers in [low, high)
    ARANGE = "arange"  # 0, 1, 2, ... (indices; still never all zeros)
    PERMUTATION = "permutation"  # a random permutation of 0..n-1 (e.g. a slot mapping)


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
    # an array's values at each size, from the program's own run (`cutune capture --data`): one file of raw
    # bytes per size, "" where none was kept; the file's bytes fill the array from its start, the spec's init the rest
    data: tuple[str, ...] = ()
    # the shape is the allocation the program passed (`cutune capture`), an upper bound of what the kernel
    # touches: the bytes it moves are unknown, so no speed-of-light floor is claimed
    bound: bool = False
    guessed: bool = field(default=False, compare=False)  # the drafter's guess of the shape (never written)
    line: int | None = None  # where it is written in the spec file (1-based)

    @property
    def is_array(self) -> bool:
        return self.shape is not None


@dataclass(frozen=True)
class IncludeRules:
    """The spec's `includes`: `#include` targets (as written) the compile unit drops, or replaces by others."""

    drop: tuple[str, ...] = ()
    substitute: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.drop or self.substitute)


@dataclass(frozen=True)
class Tolerance:
    """Allowed difference from the reference: |out - ref| <= atol + rtol * |ref|."""

    rtol: float
    atol: float


# per output dtype; integer outputs must match exactly
_TOLERANCES: dict[str, Tolerance] = {
    "float32": Tolerance(rtol=1e-5, atol=1e-6),
    "float64": Tolerance(rtol=1e-12, atol=1e-12),
    "float16": Tolerance(rtol=1e-2, atol=1e-2),
    "bfloat16": Tolerance(rtol=1e-2, atol=1e-2),
}


def default_tolerance(args: Iterable[ArgSpec]) -> Tolerance:
    """The loosest dtype tolerance over the output (out/inout) arguments; exact for integer outputs."""
    exact = Tolerance(rtol=0.0, atol=0.0)
    found = [_TOLERANCES.get(a.dtype, exact) for a in args if a.role is not Role.IN]
    return Tolerance(max((t.rtol for t in found), default=0.0), max((t.atol for t in found), default=0.0))


@dataclass(frozen=True)
class KernelSpec:
    """Everything needed to run, check and time one kernel.

    Expression names: arg shapes and scalar values see the problem sizes; grid, block, shared_mem and
    constraints also see the tunable parameters and the device limits (`DeviceLimits.as_names()`);
    bytes_moved sees sizes and parameters.
    """

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
    includes: IncludeRules = field(default_factory=IncludeRules)  # includes to drop or substitute
    path: str | None = None
    constraints: tuple[str, ...] = ()  # over sizes, parameters and limits; also in `space` when it is set
    # size variable → the divisor every value of it keeps (the kernel relies on it; ragged checks respect it)
    multiple_of: dict[str, int] = field(default_factory=dict)
    ragged: bool = True  # tails are checked at derived sizes (off once the original does not run at them)
    # per size, how much it counts in the overall geometric mean (a size entry's `weight`); empty: all 1
    weights: tuple[float, ...] = ()
    line: int | None = None  # the `[kernel.<name>]` header (1-based)
    lines: dict[str, int] = field(default_factory=dict, compare=False)  # "args[1].dtype" → line

    def launch(self, names: Mapping[str, Number]) -> tuple[Dim3, Dim3, int]:
        """Grid, block (padded to 3 dimensions) and dynamic shared memory bytes for these names."""
        grid = self._dims("grid", self.grid, names)
        block = self._dims("block", self.block, names)
        return grid, block, self._count("shared_mem", self.shared_mem, names, minimum=0)

    def array_shapes(self, size: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
        """The shape of every array argument for one problem size."""
        return {
            a.name: tuple(self._count(f"args[{i}].shape", e, size, minimum=0) for e in a.shape)
            for i, a in enumerate(self.args)
            if a.shape is not None
        }

    def scalar_values(self, size: Mapping[str, int]) -> dict[str, Number]:
        """The value of every scalar argument for one problem size."""
        return {
            a.name: self._evaluate(f"args[{i}].value", a.value, size)
            for i, a in enumerate(self.args)
            if a.value is not None
        }

    def extent_exprs(self) -> tuple[str, ...]:
        """The expressions, over the sizes, of the indices the kernel's arguments span: each array argument's
        element count and each integral scalar argument's value (a stride, an offset)."""
        arrays = ("*".join(f"({d})" for d in a.shape) for a in self.args if a.shape)
        scalars = (a.value for a in self.args if a.value is not None and a.dtype in INTEGER_DTYPES)
        return (*arrays, *scalars)

    def index_extent(self, size: Mapping[str, int]) -> int:
        """The largest index the kernel's arguments span at one size (the largest of `extent_exprs`)."""
        values = (self._evaluate("args", e, size) for e in self.extent_exprs())
        return int(max((v for v in values if isinstance(v, int | float)), default=0))

    def moved_bytes(self, size: Mapping[str, int], params: Mapping[str, Value] | None = None) -> int | None:
        """The fewest bytes to move: `bytes_moved`, or each input read once and each output written once (None
        where an array's shape is only a bound)."""
        if self.bytes_moved is not None:
            names = {**size, **{k: v for k, v in (params or {}).items() if not isinstance(v, str)}}
            return self._count("bytes_moved", self.bytes_moved, names, minimum=0)
        if any(a.bound for a in self.args):
            return None
        total = 0
        shapes = self.array_shapes(size)
        for a in self.args:
            if a.shape is None:
                continue
            elements = 1
            for n in shapes[a.name]:
                elements *= n
            passes = 2 if a.role is Role.INOUT else 1  # read once and written once
            total += passes * elements * dtype_size(a.dtype)
        return total

    def effective_tolerance(self) -> Tolerance:
        """The spec's tolerance, or the default for its output dtypes."""
        return self.tolerance if self.tolerance is not None else default_tolerance(self.args)

    def size_weights(self) -> tuple[float, ...]:
        """The weight of every size in the overall figure (1 where the spec gives none)."""
        return self.weights if self.weights else (1.0,) * len(self.sizes)

    def size_names(self) -> tuple[str, ...]:
        """The problem-size variables (every entry of `sizes` defines the same ones)."""
        return tuple(self.sizes[0]) if self.sizes else ()

    def bound_names(self) -> frozenset[str]:
        """The size variables of `bound` arrays' shapes: allocations, which no launch knows (nor keys on)."""
        return frozenset(n for a in self.args if a.bound for d in a.shape or () for n in compile_expr(d).names)

    def keyed_sizes(self) -> tuple[dict[str, int], ...]:
        """The sizes without the `bound_names`: the variables a per-size dispatch can key on."""
        bound = self.bound_names()
        return tuple({k: v for k, v in s.items() if k not in bound} for s in self.sizes)

    def with_bounds(self, size: Mapping[str, int]) -> dict[str, int]:
        """`size` with each of the `bound_names` at its largest value over the sizes (an allocation that fits)."""
        return {**size, **{n: max(s[n] for s in self.sizes) for n in self.bound_names()}}

    def line_of(self, key: str) -> int | None:
        """The line where `key` (e.g. "args[1].shape") or its closest written parent is."""
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key[: max(key.rfind("."), key.rfind("["), 0)]
        return self.line

    def error(self, key: str, message: str) -> SpecError:
        """A SpecError at `key` of this kernel's table, with file and line."""
        where = f"kernel.{self.kernel}" + (f".{key}" if key else "")
        return SpecError(message, path=self.path, line=self.line_of(key), key=where)

    def _evaluate(self, key: str, text: str, names: Mapping[str, Number]) -> Number:
        try:
            return compile_expr(text).evaluate(names)
        except ExpressionError as e:
            raise self.error(key, str(e)) from None

    def _count(self, key: str, text: str, names: Mapping[str, Number], *, minimum: int) -> int:
        value = self._evaluate(key, text, names)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"{text!r} gives {value!r}, not an integer")
        if value < minimum:
            raise self.error(key, f"{text!r} gives {value}, less than {minimum}")
        return value

    def _dims(self, key: str, texts: tuple[str, ...], names: Mapping[str, Number]) -> Dim3:
        dims = [self._count(key, t, names, minimum=1) for t in texts]
        return (*dims, 1, 1, 1)[:3]  # type: ignore[return-value]


@dataclass(frozen=True)
class SpecFile:
    """A `<stem>.tune.toml` file: one KernelSpec per `[kernel.<name>]` table."""

    path: str | None
    kernels: dict[str, KernelSpec]

    def kernel(self, name: str) -> KernelSpec:
        """The spec of kernel `name`; raises SpecError listing the kernels the file has."""
        if name in self.kernels:
            return self.kernels[name]
        known = ", ".join(self.kernels) or "none"
        raise SpecError(f"no [kernel.{name}] table (kernels here: {known})", path=self.path)
