"""The checks of every evaluation as fused CuPy kernels: one pass over each array, one transfer back.

Written out as element-wise CuPy expressions, comparing an output took eight passes and as many temporary
arrays, and their reductions went to CUB, which compiles a kernel per size class (1.8 s each on an H100,
measured by benchmarks/open_after_sanitizer.py): opening held-out sizes compiled eight of them. These
kernels are compiled once a process (0.15 s), for any size, and give numpy's counts and largest error bit for bit (each
operation rounded on its own, denormals kept). Where a check fails, the harness's element-wise path
finds where and says what, with CuPy's reductions (CUB off), outside the hot path.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from cutune.gpu.nvrtc import compile_program

Array = Any  # a cupy.ndarray

_SOURCE = r"""
typedef unsigned long long u64;

// Sums `count` and takes the largest `largest` (non-negative, so its bits order like the value) over the
// block's warps into out[0] and out[1]; every thread of the grid calls it once.
__device__ void tally(u64 count, double largest, u64* out) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    count += __shfl_down_sync(0xffffffffu, count, offset);
    largest = fmax(largest, __shfl_down_sync(0xffffffffu, largest, offset));
  }
  if ((threadIdx.x & 31) == 0) {
    if (count) atomicAdd(out, count);
    if (largest > 0) atomicMax(out + 1, (u64)__double_as_longlong(largest));
  }
}

// Bytes of `a` and `b` that differ: 32-bit words where both are aligned, bytes otherwise.
extern "C" __global__ void cutune_differing_bytes(const unsigned char* a, const unsigned char* b, u64 n, u64* out) {
  const u64 stride = (u64)gridDim.x * blockDim.x;
  const u64 first = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  const bool aligned = ((reinterpret_cast<u64>(a) | reinterpret_cast<u64>(b)) & 3) == 0;
  const u64 words = aligned ? n / 4 : 0;
  u64 count = 0;
  for (u64 i = first; i < words; i += stride) {
    unsigned int x = reinterpret_cast<const unsigned int*>(a)[i] ^ reinterpret_cast<const unsigned int*>(b)[i];
    x |= x >> 4;
    x |= x >> 2;
    x |= x >> 1;
    count += __popc(x & 0x01010101u);  // one bit per byte that differs
  }
  for (u64 i = words * 4 + first; i < n; i += stride) count += a[i] != b[i];
  tally(count, 0.0, out);
}

__device__ float add_rn(float x, float y) { return __fadd_rn(x, y); }
__device__ float sub_rn(float x, float y) { return __fsub_rn(x, y); }
__device__ float mul_rn(float x, float y) { return __fmul_rn(x, y); }
__device__ float div_rn(float x, float y) { return __fdiv_rn(x, y); }
__device__ double add_rn(double x, double y) { return __dadd_rn(x, y); }
__device__ double sub_rn(double x, double y) { return __dsub_rn(x, y); }
__device__ double mul_rn(double x, double y) { return __dmul_rn(x, y); }
__device__ double div_rn(double x, double y) { return __ddiv_rn(x, y); }

__device__ double infinity() { return __longlong_as_double(0x7ff0000000000000ULL); }  // no math.h in NVRTC

// |got - want| / (atol + rtol |want|), as harness.compare computes it: 0 where both are the same value
// (NaN and NaN included), infinite where the allowance is not positive or the quotient is NaN.
template <typename T>
__device__ T scaled_error(T got, T want, T atol, T rtol) {
  if (got == want || (isnan(got) && isnan(want))) return T(0);
  const T allowed = add_rn(atol, mul_rn(rtol, fabs(want)));
  if (!(allowed > T(0))) return T(infinity());
  const T scaled = div_rn(fabs(sub_rn(got, want)), allowed);
  return isnan(scaled) ? T(infinity()) : scaled;
}

// Elements whose scaled error exceeds 1 into out[0], the largest scaled error (as double bits) into out[1].
template <typename T>
__global__ void cutune_compare(const T* got, const T* want, u64 n, T atol, T rtol, u64* out) {
  const u64 stride = (u64)gridDim.x * blockDim.x;
  u64 count = 0;
  double largest = 0.0;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const T e = scaled_error(got[i], want[i], atol, rtol);
    count += e > T(1);
    largest = fmax(largest, (double)e);
  }
  tally(count, largest, out);
}
"""

# IEEE arithmetic as numpy does it on the host: denormals kept (a flushed one would equal zero), no FMA. Compiled
# here, not by CuPy's RawModule, which appends -ftz=true to every compile (a GPU run counted 17 of 19 differences)
_OPTIONS = ("-std=c++17", "--ftz=false", "--prec-div=true", "--fmad=false")
_COMPARE = {np.dtype(np.float32): "cutune_compare<float>", np.dtype(np.float64): "cutune_compare<double>"}
_THREADS = 256
_MAX_BLOCKS = 4096  # a grid-stride loop past this: enough blocks to fill any current GPU several times


class DeviceChecks:
    """The fused checking kernels of one CuPy module; each method launches one kernel per pair and reads
    every result back in one transfer."""

    def __init__(self, cp: ModuleType) -> None:
        self._cp = cp
        arch = f"--gpu-architecture=sm_{cp.cuda.Device().compute_capability}"
        compiled = compile_program(_SOURCE, [*_OPTIONS, arch], [*_COMPARE.values()])
        self._module = load_cubin(cp, compiled.binary)
        self._lowered = compiled.lowered

    def differing_bytes(self, pairs: Sequence[tuple[Array, Array]]) -> list[int]:
        """For each pair of equally long contiguous arrays, how many of their bytes differ."""
        function = self._module.get_function("cutune_differing_bytes")
        out = self._cp.zeros(2 * len(pairs), dtype=self._cp.uint64)
        for k, (a, b) in enumerate(pairs):
            if a.nbytes != b.nbytes:
                raise ValueError(f"arrays of {a.nbytes} and {b.nbytes} bytes cannot be compared byte for byte")
            self._launch(function, a.nbytes, (a, b, np.uint64(a.nbytes), out[2 * k :]))
        return [int(c) for c in out.get()[0::2]]

    def compare(self, items: Sequence[tuple[Array, Array, float, float]]) -> list[tuple[int, float]]:
        """For each (got, want, atol, rtol) of one float dtype (float32 or float64, contiguous): elements
        outside the tolerance, and the largest tolerance-scaled error."""
        out = self._cp.zeros(2 * len(items), dtype=self._cp.uint64)
        for k, (got, want, atol, rtol) in enumerate(items):
            dtype = np.dtype(got.dtype)
            function = self._module.get_function(self._lowered[_COMPARE[dtype]])
            args = (got, want, np.uint64(got.size), dtype.type(atol), dtype.type(rtol), out[2 * k :])
            self._launch(function, got.size, args)
        values = out.get()
        largest = values.view(np.float64)
        return [(int(values[2 * k]), float(largest[2 * k + 1])) for k in range(len(items))]

    def _launch(self, function: Any, n: int, args: tuple[Any, ...]) -> None:
        if n:
            function((min(_MAX_BLOCKS, -(-n // _THREADS)),), (_THREADS,), args)


def load_cubin(cp: ModuleType, binary: bytes) -> Any:
    """A CuPy module of a cubin, written once under cutune's cache directory by its hash (CuPy loads files)."""
    from cutune.gpu.sol import cache_dir  # sol imports the harness, which imports this module

    path = cache_dir() / "cubin" / f"{hashlib.sha256(binary).hexdigest()}.cubin"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(binary)
    return cp.RawModule(path=str(path))


@functools.cache
def device_checks(xp: ModuleType) -> DeviceChecks | None:
    """The fused checks for array module `xp`; None for numpy, whose element-wise path is the reference."""
    return None if xp is np else DeviceChecks(xp)


@contextlib.contextmanager
def plain_reductions(xp: ModuleType) -> Iterator[None]:
    """CuPy's reductions without CUB while inside: the element-wise checks that remain (a reference's
    validation, a failure's details) then compile once per operation and dtype, not once per size class."""
    core = getattr(xp, "_core", None)
    if core is None or not hasattr(core, "set_routine_accelerators"):  # numpy, or a CuPy without the switch
        yield
        return
    routines, reductions = list(core.get_routine_accelerators()), list(core.get_reduction_accelerators())
    core.set_routine_accelerators([])
    core.set_reduction_accelerators([])
    try:
        yield
    finally:
        core.set_routine_accelerators(routines)
        core.set_reduction_accelerators(reductions)
