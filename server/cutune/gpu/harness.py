"""Measuring helpers: allocate and fill arguments, poison outputs, compare with tolerances, time with events.

The data helpers take an array module (`numpy` or `cupy`), so the same code runs on the host in tests
and on the device in the backend. bfloat16 arrays are stored as uint16 bit patterns: kernels only see
pointers, and converting on the device with round-to-nearest-even needs no bfloat16 support in CuPy.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from cutune.errors import ReferenceInvalid
from cutune.gpu.backend import Failure, TimingOptions
from cutune.gpu.device_checks import device_checks, plain_reductions
from cutune.gpu.guards import GUARD_BYTES, GuardedArray, allocate, breaches, guard_pattern
from cutune.spec import ArgSpec, Init, KernelSpec, Role, Tolerance, default_tolerance
from cutune.template.dtypes import struct_bytes

Array = Any  # a numpy.ndarray or cupy.ndarray

_FLOATS = ("float16", "bfloat16", "float32", "float64")
_BF16_QUIET_NAN = 0x7FC0


def storage_dtype(dtype: str) -> np.dtype[Any]:
    """The numpy dtype an argument of spec dtype `dtype` is stored as (bfloat16 → uint16 bits)."""
    return np.dtype(np.uint16) if dtype == "bfloat16" else np.dtype(dtype)


def bf16_from_float32(x: Array, xp: ModuleType) -> Array:
    """bfloat16 bit patterns of float32 values, rounded to nearest even (NaN stays a quiet NaN)."""
    bits = xp.ascontiguousarray(x, dtype=xp.float32).view(xp.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return xp.where(xp.isnan(x), _BF16_QUIET_NAN, rounded).astype(xp.uint16)


def float32_from_bf16(bits: Array, xp: ModuleType) -> Array:
    """float32 values of bfloat16 bit patterns (exact)."""
    return (bits.astype(xp.uint32) << 16).view(xp.float32)


def comparable(a: Array, dtype: str, xp: ModuleType) -> Array:
    """A stored array as floats to compare: float32 for 16/32-bit floats, float64 otherwise."""
    if dtype == "bfloat16":
        return float32_from_bf16(a, xp)
    if dtype in ("float16", "float32"):
        return a.astype(xp.float32, copy=False)
    return a.astype(xp.float64, copy=False)


def fill(arg: ArgSpec, shape: tuple[int, ...], rng: Any, xp: ModuleType) -> Array:
    """A fresh array for `arg`, initialised as the spec says, in its storage dtype."""
    n = math.prod(shape)
    wide = xp.float64 if arg.dtype in ("float64", "int64") else xp.float32
    if arg.init is Init.PERMUTATION:  # argsort of random keys: exact for any n, on numpy and CuPy alike
        return xp.argsort(rng.random(n, dtype=xp.float64)).astype(arg.dtype).reshape(shape)
    if arg.dtype == "bool" and arg.init in (Init.NORMAL, Init.UNIFORM):
        return (rng.random(n, dtype=xp.float32) < 0.5).reshape(shape)  # true and false, half each
    if arg.init is Init.ARANGE:
        values = xp.arange(n, dtype=wide)
    elif arg.init is Init.RANDINT:
        values = rng.integers(int(arg.low), int(arg.high), size=n).astype(wide)
    elif arg.init is Init.UNIFORM:
        values = (arg.low + (arg.high - arg.low) * rng.random(n, dtype=wide)).astype(wide)
    else:
        values = (rng.standard_normal(n, dtype=wide) * arg.scale).astype(wide)
    if arg.dtype == "bfloat16":
        stored = bf16_from_float32(values.astype(xp.float32), xp)
    elif arg.dtype in _FLOATS:
        stored = values.astype(arg.dtype)
    elif arg.dtype == "bool":
        stored = xp.rint(values) != 0
    else:  # integer arguments take whole numbers (a normal init is rounded)
        stored = xp.rint(values).astype(arg.dtype)
    return stored.reshape(shape)


def fill_from(arg: ArgSpec, shape: tuple[int, ...], path: str, rng: Any, xp: ModuleType) -> Array:
    """`arg`'s array holding the program's own values (raw bytes in `path`, as `cutune capture --data` kept
    them) from its start; a snapshot capped short of the array leaves the rest as the spec's init fills it."""
    values = fill(arg, shape, rng, xp)
    flat = values.reshape(-1)
    raw = np.fromfile(path, dtype=np.uint8)
    n = min(flat.size, raw.size // flat.dtype.itemsize)
    flat[:n] = xp.asarray(raw[: n * flat.dtype.itemsize].view(flat.dtype))
    return values


def real_inputs(spec: KernelSpec) -> str | None:
    """What a report says about inputs from the program's run: which arrays, at how many sizes (None: none)."""
    real = [f"`{a.name}` ({sum(1 for f in a.data if f)} of {len(spec.sizes)} sizes)" for a in spec.args if any(a.data)]
    if not real:
        return None
    return "inputs from the program's own run (cutune capture --data): " + ", ".join(real) + "; the others random"


def scalar(arg: ArgSpec, value: float | int | bool) -> np.generic:
    """A scalar kernel argument as the numpy type that makes CuPy pass it with the right C type."""
    if arg.dtype == "bfloat16":
        return np.uint16(bf16_from_float32(np.asarray([value], dtype=np.float32), np)[0])
    if (size := struct_bytes(arg.dtype)) is not None:  # CuPy passes a structured scalar's bytes by value
        raw = int(value).to_bytes(size, "little")
        return np.frombuffer(raw, dtype=np.dtype([("bytes", np.uint8, (size,))]))[0]
    return storage_dtype(arg.dtype).type(value)


POISON = 0xFF  # NaN for every float dtype, all-ones for integers
POISON_2 = 0x3C  # finite for every float dtype: the reference's second run tells unwritten from read


def poison(a: Array, byte: int = POISON) -> None:
    """Fill every byte with `byte` (default 0xFF: NaN for every float dtype, all-ones for integers)."""
    a.view(np.uint8).fill(byte)


def element_bytes(a: Array, xp: ModuleType) -> Array:
    """A contiguous array as a (elements, itemsize) uint8 matrix."""
    return a.reshape(-1).view(xp.uint8).reshape(a.size, a.dtype.itemsize)


def holds_byte(a: Array, byte: int, xp: ModuleType) -> Array:
    """Per element: whether every byte of it is `byte` (e.g. still poisoned)."""
    return (element_bytes(a, xp) == byte).all(axis=1)


def same_bytes(a: Array, b: Array, xp: ModuleType) -> Array:
    """Per element: whether `a` and `b` hold the same bytes (NaN-safe, exact)."""
    return (element_bytes(a, xp) == element_bytes(b, xp)).all(axis=1)


def nonfinite(a: Array, dtype: str, xp: ModuleType) -> Array:
    """Per element: NaN or infinite (never, for integer dtypes)."""
    if dtype not in _FLOATS:
        return xp.zeros(a.size, dtype=bool)
    return ~xp.isfinite(comparable(a, dtype, xp).reshape(-1))


@dataclass(frozen=True)
class Comparison:
    """How far an output is from the reference, in units of the allowed error."""

    max_scaled: float  # the largest |out - ref| / (atol + rtol |ref|); inf for NaN or a missing value
    mismatches: int  # elements with a scaled error above 1
    total: int
    worst_index: tuple[int, ...]  # with got and expected, found only where an element fails on the device
    got: float
    expected: float

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    def describe(self, name: str) -> str:
        """One line for a failure's detail."""
        where = ",".join(str(i) for i in self.worst_index)
        return (
            f"{name}: {self.mismatches} of {self.total} elements differ; worst at [{where}]: "
            f"got {self.got:.6g}, expected {self.expected:.6g} (scaled error {self.max_scaled:.3g})"
        )


def compare(out: Array, ref: Array, dtype: str, tolerance: Tolerance, xp: ModuleType) -> Comparison:
    """Compare an output with the reference; NaN matches only NaN, infinities only themselves."""
    return compare_all([(out, ref, dtype, tolerance)], xp)[0]


def compare_all(items: Sequence[tuple[Array, Array, str, Tolerance]], xp: ModuleType) -> list[Comparison]:
    """`compare` for each (output, reference, dtype, tolerance); on the device, fused kernels count and
    scale the errors, and only a failing output is searched element-wise for a worst element to show."""
    fused = device_checks(xp)
    if fused is None:
        return [_compare_elementwise(out, ref, dtype, tolerance, xp) for out, ref, dtype, tolerance in items]
    flat = [(comparable(out, dtype, xp).ravel(), comparable(ref, dtype, xp).ravel()) for out, ref, dtype, _ in items]
    stats = fused.compare([(a, b, t.atol, t.rtol) for (a, b), (_, _, _, t) in zip(flat, items, strict=True)])
    # the counts are the fused kernel's: CuPy's element-wise kernels flush denormals, numpy and it do not
    return [
        Comparison(largest, 0, out.size, (), 0.0, 0.0)
        if mismatches == 0
        else dataclasses.replace(
            _compare_elementwise(out, ref, dtype, tolerance, xp), max_scaled=largest, mismatches=mismatches
        )
        for (mismatches, largest), (out, ref, dtype, tolerance) in zip(stats, items, strict=True)
    ]


def _compare_elementwise(out: Array, ref: Array, dtype: str, tolerance: Tolerance, xp: ModuleType) -> Comparison:
    a = comparable(out, dtype, xp).ravel()
    b = comparable(ref, dtype, xp).ravel()
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"), plain_reductions(xp):  # host path warns
        same = (a == b) | (xp.isnan(a) & xp.isnan(b))
        allowed = tolerance.atol + tolerance.rtol * xp.abs(b)
        positive = allowed > 0  # False where the reference is NaN: any other value there fails
        scaled = xp.where(positive, xp.abs(a - b) / xp.where(positive, allowed, 1), xp.inf)
        scaled = xp.where(same, 0, xp.where(xp.isnan(scaled), xp.inf, scaled))
        worst = int(xp.argmax(scaled)) if scaled.size else 0
        mismatches = int((scaled > 1).sum())
    return Comparison(
        max_scaled=float(scaled[worst]) if scaled.size else 0.0,
        mismatches=mismatches,
        total=int(scaled.size),
        worst_index=tuple(int(i) for i in np.unravel_index(worst, out.shape)) if scaled.size else (),
        got=float(a[worst]) if scaled.size else 0.0,
        expected=float(b[worst]) if scaled.size else 0.0,
    )


@dataclass(frozen=True)
class Verdict:
    """Whether a checked run was right, and if not, the class of the failure and what was seen."""

    failure: Failure | None
    detail: str = ""
    max_scaled: float = 0.0  # the largest tolerance-scaled error over the outputs

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass
class Problem:
    """One problem size's arguments: working arrays, pristine inputs and (once run) the reference.

    Arrays sit inside guard regions (`guarded`); `timed` is False for the ragged sizes that are only
    checked, never timed.
    """

    size: dict[str, int]
    specs: tuple[ArgSpec, ...]
    args: list[Any]  # launch arguments in kernel order: arrays and numpy scalars
    arrays: dict[str, Array]
    pristine: dict[str, Array]  # copies of in/inout arrays, restored before every checked run
    reference: dict[str, Array] = field(default_factory=dict)  # out/inout arrays after the reference run
    guarded: dict[str, GuardedArray] = field(default_factory=dict)
    pattern: Array = None  # the guards' byte pattern
    timed: bool = True

    @property
    def outputs(self) -> tuple[ArgSpec, ...]:
        return tuple(a for a in self.specs if a.is_array and a.role is not Role.IN)

    @property
    def label(self) -> str:
        """E.g. "num_tokens=15, d=4095 (ragged)"."""
        return ", ".join(f"{k}={v}" for k, v in self.size.items()) + ("" if self.timed else " (ragged)")

    def restore(self, xp: ModuleType, *, inputs: bool = True) -> None:
        """Copy pristine values back: inout arrays always, pure inputs too unless `inputs` is False."""
        for a in self.specs:
            if a.name in self.pristine and (inputs or a.role is Role.INOUT):
                xp.copyto(self.arrays[a.name], self.pristine[a.name])

    def prepare_checked_run(self, xp: ModuleType, byte: int = POISON, poisons: Mapping[str, int] | None = None) -> None:
        """Restore every input and poison every pure output (with `byte`, or its byte in `poisons`), so
        unwritten elements fail the check."""
        self.restore(xp)
        for a in self.specs:
            if a.is_array and a.role is Role.OUT:
                poison(self.arrays[a.name], (poisons or {}).get(a.name, byte))

    def keep_reference(self) -> None:
        """Remember the current outputs as the reference."""
        self.reference = {a.name: self.arrays[a.name].copy() for a in self.outputs}

    def snapshot(self) -> dict[str, Array]:
        """Copies of the current outputs."""
        return {a.name: self.arrays[a.name].copy() for a in self.outputs}

    def check(self, spec: KernelSpec, xp: ModuleType) -> list[tuple[ArgSpec, Comparison]]:
        """Compare every output with the reference, each with the spec's or its dtype's tolerance."""
        items = [(self.arrays[a.name], self.reference[a.name], a.dtype, tolerance_for(spec, a)) for a in self.outputs]
        return list(zip(self.outputs, compare_all(items, xp), strict=True))

    def written_inputs(self, xp: ModuleType) -> list[tuple[str, int]]:
        """`in` arrays whose bytes differ from their pristine copy: (name, changed elements)."""
        names = [a.name for a in self.specs if a.is_array and a.role is Role.IN]
        if (fused := device_checks(xp)) is not None:  # which changed, fused; how many elements, only for those
            changed = fused.differing_bytes([(self.arrays[n], self.pristine[n]) for n in names])
            names = [n for n, c in zip(names, changed, strict=True) if c]
        if not names:
            return []
        with plain_reductions(xp):
            stacked = xp.stack([xp.count_nonzero(~same_bytes(self.arrays[n], self.pristine[n], xp)) for n in names])
        counts = stacked.tolist()
        return [(n, int(c)) for n, c in zip(names, counts, strict=True) if c]

    def verdict(self, spec: KernelSpec, xp: ModuleType) -> Verdict:
        """Judge the checked run that just ended: guards, inputs, then every output against the reference."""
        where = f"at {self.label}"
        if found := breaches(list(self.guarded.values()), self.pattern, xp):
            return Verdict(Failure.OUT_OF_BOUNDS, f"{where}: " + "; ".join(b.describe() for b in found))
        if written := self.written_inputs(xp):
            listed = "; ".join(f"`{n}`: {c} elements changed" for n, c in written)
            return Verdict(Failure.INPUT_WRITTEN, f"{where}: wrote into an input: {listed}")
        compared = self.check(spec, xp)
        worst = max((c.max_scaled for _, c in compared), default=0.0)
        wrong = [(a, c) for a, c in compared if not c.ok]
        if not wrong:
            return Verdict(None, max_scaled=worst)
        unwritten = [self._unwritten(a, xp) for a, _ in wrong]
        if all(u == c.mismatches for u, (_, c) in zip(unwritten, wrong, strict=True)):
            parts = [
                f"`{a.name}`: {u} of {c.total} elements not written"
                + (" back (still the input)" if a.role is Role.INOUT else " (still poisoned)")
                for u, (a, c) in zip(unwritten, wrong, strict=True)
            ]
            return Verdict(Failure.UNWRITTEN, f"{where}: " + "; ".join(parts), worst)
        return Verdict(Failure.WRONG, f"{where}: " + "; ".join(c.describe(a.name) for a, c in wrong), worst)

    def _unwritten(self, arg: ArgSpec, xp: ModuleType) -> int:
        """Elements that differ from the reference because they were never written."""
        got, ref = self.arrays[arg.name], self.reference[arg.name]
        with plain_reductions(xp):
            if arg.role is Role.OUT:
                left = holds_byte(got, POISON, xp)
            else:  # an inout not written back still holds its input, where the reference changed it
                before = self.pristine[arg.name]
                left = same_bytes(got, before, xp) & ~same_bytes(ref, before, xp)
            return int(xp.count_nonzero(left & ~same_bytes(got, ref, xp)))

    def validate_reference(
        self,
        spec: KernelSpec,
        second: dict[str, Array],
        xp: ModuleType,
        rerun: Callable[[Mapping[str, int]], None] | None = None,
    ) -> None:
        """Check the original's outputs, after two runs whose pure outputs were poisoned with POISON and
        POISON_2 (`second` holds the latter's outputs); raise ReferenceInvalid saying what to change.

        `rerun(poisons)` runs the original again with a poison byte per pure output: with several
        outputs depending on what they held, it finds which of them the kernel actually reads.
        """
        with plain_reductions(xp):  # once per size: compiled once, not once per size class
            self._validate_reference(spec, second, xp, rerun)

    def _validate_reference(
        self,
        spec: KernelSpec,
        second: dict[str, Array],
        xp: ModuleType,
        rerun: Callable[[Mapping[str, int]], None] | None,
    ) -> None:
        where = f"at {self.label}"
        if found := breaches(list(self.guarded.values()), self.pattern, xp):
            b = found[0]
            raise ReferenceInvalid(
                f"the original kernel writes outside an array {where}: {b.describe()}: is its shape right?", b.name
            )
        for name, count in self.written_inputs(xp):
            raise ReferenceInvalid(
                f"`{name}` is written by the original kernel {where} ({count} elements changed): "
                "declare it `inout` (or `out`)",
                name,
            )
        pure = [a for a in self.outputs if a.role is Role.OUT]
        for a in pure:
            left = holds_byte(self.reference[a.name], POISON, xp) & holds_byte(second[a.name], POISON_2, xp)
            if count := int(xp.count_nonzero(left)):
                raise ReferenceInvalid(
                    f"`{a.name}`: {count} of {left.size} elements are never written by the original kernel {where}: "
                    "is the shape right? (if the kernel relies on a size being a multiple of something, declare "
                    "it: multiple_of = { name = N })",
                    a.name,
                )
        differs = {
            a.name: compare(second[a.name], self.reference[a.name], a.dtype, tolerance_for(spec, a), xp)
            for a in self.outputs
        }
        if any(not differs[a.name].ok for a in pure):  # a result depends on what an output held before
            read = [a.name for a in pure if not differs[a.name].ok]
            if rerun is not None and len(pure) > 1:
                read = [a.name for a in pure if self._depends_on(a.name, pure, second, spec, xp, rerun)] or read
            listed = ", ".join(f"`{n}`" for n in read)
            one = len(read) == 1
            raise ReferenceInvalid(
                f"{listed} {'is' if one else 'are'} read before {'it is' if one else 'they are'} written {where}: "
                f"the original's results depend on what {'it' if one else 'they'} held before the run: "
                f"declare {'it' if one else 'them'} `inout`",
                read[0],
            )
        inputs_finite = all(
            not bool(xp.any(nonfinite(self.pristine[a.name], a.dtype, xp)))
            for a in self.specs
            if a.name in self.pristine
        )
        for a in self.outputs:
            bad = int(xp.count_nonzero(nonfinite(self.reference[a.name], a.dtype, xp)))
            if inputs_finite and bad:
                raise ReferenceInvalid(
                    f"`{a.name}`: the original kernel gives {bad} of {self.reference[a.name].size} non-finite values "
                    f"from finite inputs {where}: check the inputs' init/low/high/scale",
                    a.name,
                )
            if not differs[a.name].ok:
                raise ReferenceInvalid(
                    f"the original kernel gives different results for `{a.name}` on the same inputs {where} "
                    f"({differs[a.name].mismatches} of {differs[a.name].total} elements): a race? It cannot serve "
                    "as the reference",
                    a.name,
                )

    def _depends_on(
        self,
        name: str,
        pure: Sequence[ArgSpec],
        second: dict[str, Array],
        spec: KernelSpec,
        xp: ModuleType,
        rerun: Callable[[Mapping[str, int]], None],
    ) -> bool:
        """Whether poisoning only `name` (the others hold POISON_2, as in `second`) changes any output."""
        rerun({a.name: POISON if a.name == name else POISON_2 for a in pure})
        return any(
            not compare(self.arrays[a.name], second[a.name], a.dtype, tolerance_for(spec, a), xp).ok
            for a in self.outputs
        )


def tolerance_for(spec: KernelSpec, arg: ArgSpec) -> Tolerance:
    """The spec's tolerance, or the default of this output's own dtype."""
    return spec.tolerance if spec.tolerance is not None else default_tolerance([arg])


def make_problem(
    spec: KernelSpec,
    size: Mapping[str, int],
    rng: Any,
    xp: ModuleType,
    *,
    guard_bytes: int = GUARD_BYTES,
    timed: bool = True,
    base: int | None = None,
) -> Problem:
    """Allocate (inside armed guards) and fill every argument of `spec` for one problem size; a ragged size
    derived from `spec.sizes[base]` takes that size's captured inputs (from their start)."""
    shapes = spec.array_shapes(size)
    values = spec.scalar_values(size)
    # the program's own values where the capture kept them for this size, or the size a ragged one comes from
    index = spec.sizes.index(dict(size)) if base is None and dict(size) in spec.sizes else base
    pattern = guard_pattern(guard_bytes, xp)
    args: list[Any] = []
    arrays: dict[str, Array] = {}
    pristine: dict[str, Array] = {}
    guarded: dict[str, GuardedArray] = {}
    for a in spec.args:
        if a.shape is None:
            args.append(scalar(a, values[a.name]))
            continue
        g = guarded[a.name] = allocate(a.name, shapes[a.name], storage_dtype(a.dtype), xp, guard_bytes)
        g.arm(pattern)
        arrays[a.name] = g.array
        if a.role is not Role.OUT:
            data = a.data[index] if index is not None and a.data else ""
            made = fill_from(a, shapes[a.name], data, rng, xp) if data else fill(a, shapes[a.name], rng, xp)
            pristine[a.name] = made
            xp.copyto(g.array, pristine[a.name])
        args.append(g.array)
    return Problem(dict(size), spec.args, args, arrays, pristine, guarded=guarded, pattern=pattern, timed=timed)


def summarize(samples_us: Sequence[float]) -> tuple[float, float, float]:
    """Median, 10th and 90th percentile of timing samples."""
    p50, p10, p90 = np.percentile(np.asarray(samples_us, dtype=np.float64), [50, 10, 90])
    return float(p50), float(p10), float(p90)


def next_target(samples_us: Sequence[float], options: TimingOptions) -> int:
    """How many samples to have in all: 0 when reps and min_time_ms are met (or max_reps is reached)."""
    count = len(samples_us)
    total_us = float(sum(samples_us))
    if count >= options.max_reps or (count >= options.reps and total_us >= options.min_time_ms * 1000):
        return 0
    if count == 0:
        return min(max(options.reps, 1), options.max_reps)
    missing_us = options.min_time_ms * 1000 - total_us
    more = math.ceil(missing_us / (total_us / count)) if total_us > 0 else count
    return min(options.max_reps, max(options.reps, count + max(more, 1)))


# Spins on the global nanosecond timer: queued ahead of a chunk of launches, it lets the host enqueue
# them all before the GPU reaches them, so no event pair measures host launch latency.
_HOLD_SOURCE = r"""
extern "C" __global__ void cutune_hold(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
"""
_CHUNK = 64  # launches enqueued behind one hold
_HOST_NS_PER_LAUNCH = 20_000  # a generous bound on the host's cost of one timed repetition
MAX_ROTATION = 64  # input copies rotated under graph timing, at most
# argument copies event timing cycles through, at most (at sizes whose arrays fit twice in the L2; one beyond):
# the time of a few-µs kernel depends on where its buffers lie, fixed when a backend opens, so two runs' medians
# of one configuration differed by up to 2.8% with one placement and 1.6% with eight (H200, 2026-11-28,
# benchmarks/reopen_spread.py), against 0.3-0.6% between the rounds of one run
PLACEMENTS = 8


def rotation_count(launch_bytes: int, l2_bytes: int) -> int:
    """How many copies of a launch's arrays a graph rotates through so that, by the time a copy comes round
    again, more than twice the L2 has been touched since: the L2 holds none of its data."""
    if launch_bytes <= 0 or launch_bytes >= 2 * l2_bytes:
        return 1  # one launch alone sweeps the L2 twice
    return min(MAX_ROTATION, math.ceil(2 * l2_bytes / launch_bytes) + 1)


def rotated_args(problem: Problem, copies: int, xp: ModuleType) -> list[list[Any]]:
    """`copies` argument lists for a problem: its own, then copies of its arrays (scalars shared)."""
    rotations = [list(problem.args)]
    for _ in range(copies - 1):
        rotations.append([a.copy() if isinstance(a, xp.ndarray) else a for a in problem.args])
    return rotations


class Timer:
    """Times launches with CUDA events on the current stream; flushes L2 between repetitions."""

    def __init__(self, l2_bytes: int) -> None:
        import cupy

        self._cp = cupy
        self._flush_bytes = 2 * l2_bytes
        self._flush_buffer: Any = None
        self._hold = cupy.RawKernel(_HOLD_SOURCE, "cutune_hold")
        self._events: list[tuple[Any, Any]] = []
        # hold the GPU while the host enqueues each chunk of repetitions, flushing or not (False: the timing
        # before the checks-on spread was diagnosed, kept for benchmarks/checks_spread.py to compare)
        self.queue_ahead = True

    def flush(self) -> None:
        """Evict L2 by writing a buffer twice its size (a memset kernel)."""
        cp = self._cp
        if self._flush_buffer is None:
            self._flush_buffer = cp.empty(self._flush_bytes, dtype=cp.uint8)
        stream = cp.cuda.get_current_stream()
        cp.cuda.runtime.memsetAsync(self._flush_buffer.data.ptr, 0, self._flush_bytes, stream.ptr)

    def time(
        self, launch: Callable[[], None], options: TimingOptions, before: Callable[[], None] | None = None
    ) -> list[float]:
        """Microseconds per launch: warm-up, then repetitions until reps and min_time_ms are both met.

        `before` runs before each repetition (e.g. restoring in-place outputs), outside the timed
        region and before the L2 flush, so it leaves no data in the cache.
        """
        for _ in range(options.warmup):
            if before:
                before()
            launch()
        self._cp.cuda.get_current_stream().synchronize()
        samples: list[float] = []
        while target := next_target(samples, options):
            samples += self._batch(launch, before, target - len(samples), options.flush_l2)
        return samples

    def time_graph(self, launches: Sequence[Callable[[], None]], options: TimingOptions) -> list[float]:
        """Microseconds per launch, from graphs of `options.graph_launches` back-to-back launches that cycle
        through `launches` (one per rotated input copy); repetitions until reps and min_time_ms are met.

        No L2 flush: the rotation keeps earlier launches' data out of the L2, as in a serving step where
        each kernel reads what the one before it did not. In-place outputs are not restored between the
        launches of a graph (their values drift; the work per launch does not)."""
        cp = self._cp
        # a stream of its own (capture cannot run on the legacy default stream, nor sync with it implicitly):
        # what the default stream wrote into the inputs must be done before it starts
        cp.cuda.get_current_stream().synchronize()
        stream = cp.cuda.Stream(non_blocking=True)
        n = options.graph_launches
        with stream:
            for _ in range(options.warmup):
                for launch in launches:
                    launch()
            # relaxed: the backend's compile threads may load modules meanwhile, which global mode forbids
            stream.begin_capture(mode=getattr(cp.cuda.runtime, "streamCaptureModeRelaxed", 2))
            try:
                for i in range(n):
                    launches[i % len(launches)]()
            finally:
                graph = stream.end_capture()  # ends the capture even when a launch raised
            graph.launch(stream)  # the first launch of a graph pays one-time costs (its upload)
            stream.synchronize()
            totals: list[float] = []  # µs per graph
            while target := next_target(totals, options):
                totals += self._graph_batch(graph, stream, target - len(totals))
        return [t / n for t in totals]

    def _graph_batch(self, graph: Any, stream: Any, n: int) -> list[float]:
        cp = self._cp
        events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(n)]
        for first in range(0, n, _CHUNK):
            chunk = events[first : first + _CHUNK]
            # the GPU waits while the host enqueues the chunk: no event pair measures host launch latency
            self._hold((1,), (1,), (np.uint64(len(chunk) * _HOST_NS_PER_LAUNCH),))  # on `stream`: the current one
            for start, end in chunk:
                start.record(stream)
                graph.launch(stream)
                end.record(stream)
        events[-1][1].synchronize()
        return [cp.cuda.get_elapsed_time(start, end) * 1000.0 for start, end in events]

    def _batch(self, launch: Callable[[], None], before: Callable[[], None] | None, n: int, flush: bool) -> list[float]:
        cp = self._cp
        stream = cp.cuda.get_current_stream()
        while len(self._events) < n:
            self._events.append((cp.cuda.Event(), cp.cuda.Event()))
        events = self._events[:n]
        for first in range(0, n, _CHUNK):
            chunk = events[first : first + _CHUNK]
            # with a flush the memset usually keeps the GPU behind the host, but not when the host stalls
            # (the garbage collector, a compile thread holding the GIL): then an event pair would time the
            # GPU waiting for the launch, for a whole measurement. Queued ahead, it never does.
            if self.queue_ahead or not flush:
                self._hold((1,), (1,), (np.uint64(len(chunk) * _HOST_NS_PER_LAUNCH),))
            for start, end in chunk:
                if before:
                    before()
                if flush:
                    self.flush()
                start.record(stream)
                launch()
                end.record(stream)
        events[-1][1].synchronize()
        return [cp.cuda.get_elapsed_time(start, end) * 1000.0 for start, end in events]
