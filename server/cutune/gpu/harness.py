"""Measuring helpers: allocate and fill arguments, poison outputs, compare with tolerances, time with events.

The data helpers take an array module (`numpy` or `cupy`), so the same code runs on the host in tests
and on the device in the backend. bfloat16 arrays are stored as uint16 bit patterns: kernels only see
pointers, and converting on the device with round-to-nearest-even needs no bfloat16 support in CuPy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from cutune.gpu.backend import TimingOptions
from cutune.template.spec import ArgSpec, Init, KernelSpec, Role, Tolerance, default_tolerance

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
    else:  # integer arguments take whole numbers (a normal init is rounded)
        stored = xp.rint(values).astype(arg.dtype)
    return stored.reshape(shape)


def scalar(arg: ArgSpec, value: float | int | bool) -> np.generic:
    """A scalar kernel argument as the numpy type that makes CuPy pass it with the right C type."""
    if arg.dtype == "bfloat16":
        return np.uint16(bf16_from_float32(np.asarray([value], dtype=np.float32), np)[0])
    return storage_dtype(arg.dtype).type(value)


def poison(a: Array) -> None:
    """Fill every byte with 0xFF: NaN for every float dtype, all-ones for integers."""
    a.view(np.uint8).fill(0xFF)


@dataclass(frozen=True)
class Comparison:
    """How far an output is from the reference, in units of the allowed error."""

    max_scaled: float  # the largest |out - ref| / (atol + rtol |ref|); inf for NaN or a missing value
    mismatches: int  # elements with a scaled error above 1
    total: int
    worst_index: tuple[int, ...]
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
    a = comparable(out, dtype, xp).ravel()
    b = comparable(ref, dtype, xp).ravel()
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # the host path would warn
        same = (a == b) | (xp.isnan(a) & xp.isnan(b))
        allowed = tolerance.atol + tolerance.rtol * xp.abs(b)
        positive = allowed > 0  # False where the reference is NaN: any other value there fails
        scaled = xp.where(positive, xp.abs(a - b) / xp.where(positive, allowed, 1), xp.inf)
        scaled = xp.where(same, 0, xp.where(xp.isnan(scaled), xp.inf, scaled))
    worst = int(xp.argmax(scaled)) if scaled.size else 0
    return Comparison(
        max_scaled=float(scaled[worst]) if scaled.size else 0.0,
        mismatches=int((scaled > 1).sum()),
        total=int(scaled.size),
        worst_index=tuple(int(i) for i in np.unravel_index(worst, out.shape)) if scaled.size else (),
        got=float(a[worst]) if scaled.size else 0.0,
        expected=float(b[worst]) if scaled.size else 0.0,
    )


@dataclass
class Problem:
    """One problem size's arguments: working arrays, pristine inputs and (once run) the reference."""

    size: dict[str, int]
    specs: tuple[ArgSpec, ...]
    args: list[Any]  # launch arguments in kernel order: arrays and numpy scalars
    arrays: dict[str, Array]
    pristine: dict[str, Array]  # copies of in/inout arrays, restored before every checked run
    reference: dict[str, Array] = field(default_factory=dict)  # out/inout arrays after the reference run

    @property
    def outputs(self) -> tuple[ArgSpec, ...]:
        return tuple(a for a in self.specs if a.is_array and a.role is not Role.IN)

    def restore(self, xp: ModuleType, *, inputs: bool = True) -> None:
        """Copy pristine values back: inout arrays always, pure inputs too unless `inputs` is False."""
        for a in self.specs:
            if a.name in self.pristine and (inputs or a.role is Role.INOUT):
                xp.copyto(self.arrays[a.name], self.pristine[a.name])

    def prepare_checked_run(self, xp: ModuleType) -> None:
        """Restore every input and poison every pure output, so unwritten elements fail the check."""
        self.restore(xp)
        for a in self.specs:
            if a.is_array and a.role is Role.OUT:
                poison(self.arrays[a.name])

    def keep_reference(self) -> None:
        """Remember the current outputs as the reference."""
        self.reference = {a.name: self.arrays[a.name].copy() for a in self.outputs}

    def check(self, spec: KernelSpec, xp: ModuleType) -> list[tuple[ArgSpec, Comparison]]:
        """Compare every output with the reference, each with the spec's or its dtype's tolerance."""
        return [
            (a, compare(self.arrays[a.name], self.reference[a.name], a.dtype, tolerance_for(spec, a), xp))
            for a in self.outputs
        ]


def tolerance_for(spec: KernelSpec, arg: ArgSpec) -> Tolerance:
    """The spec's tolerance, or the default of this output's own dtype."""
    return spec.tolerance if spec.tolerance is not None else default_tolerance([arg])


def make_problem(spec: KernelSpec, size: Mapping[str, int], rng: Any, xp: ModuleType) -> Problem:
    """Allocate and fill every argument of `spec` for one problem size (fresh random data from `rng`)."""
    shapes = spec.array_shapes(size)
    values = spec.scalar_values(size)
    args: list[Any] = []
    arrays: dict[str, Array] = {}
    pristine: dict[str, Array] = {}
    for a in spec.args:
        if a.shape is None:
            args.append(scalar(a, values[a.name]))
            continue
        shape = shapes[a.name]
        if a.role is Role.OUT:
            arrays[a.name] = xp.empty(shape, dtype=storage_dtype(a.dtype))
        else:
            pristine[a.name] = fill(a, shape, rng, xp)
            arrays[a.name] = pristine[a.name].copy()
        args.append(arrays[a.name])
    return Problem(dict(size), spec.args, args, arrays, pristine)


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


class Timer:
    """Times launches with CUDA events on the current stream; flushes L2 between repetitions."""

    def __init__(self, l2_bytes: int) -> None:
        import cupy

        self._cp = cupy
        self._flush_bytes = 2 * l2_bytes
        self._flush_buffer: Any = None
        self._hold = cupy.RawKernel(_HOLD_SOURCE, "cutune_hold")
        self._events: list[tuple[Any, Any]] = []

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

    def _batch(self, launch: Callable[[], None], before: Callable[[], None] | None, n: int, flush: bool) -> list[float]:
        cp = self._cp
        stream = cp.cuda.get_current_stream()
        while len(self._events) < n:
            self._events.append((cp.cuda.Event(), cp.cuda.Event()))
        events = self._events[:n]
        for first in range(0, n, _CHUNK):
            chunk = events[first : first + _CHUNK]
            if not flush:  # with a flush, the memset already keeps the GPU busy ahead of the host
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
