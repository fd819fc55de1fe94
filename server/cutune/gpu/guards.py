"""Guard regions: every array lives between two bands of a known byte pattern, checked after checked runs.

A configuration whose bound check is off by a few elements writes into the allocator's padding: every
element of the output is right, so only the bytes around it can tell. Each array is a view into one
buffer `[guard | data | guard]`; a changed guard byte is an out-of-bounds write, reported by side and
byte count. Guards are 64 KiB (a multiple of 256, so the data keeps the allocator's alignment): enough
for an overrun of a whole block of 16-byte stores. With `guard_bytes=0` an array is allocated exactly,
as compute-sanitizer needs it to see overruns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from cutune.gpu.device_checks import device_checks

Array = Any  # a numpy.ndarray or cupy.ndarray

GUARD_BYTES = 64 * 1024


def guard_pattern(nbytes: int, xp: ModuleType) -> Array:
    """A byte pattern that varies along the band, so a kernel storing one value never rewrites it."""
    return ((xp.arange(nbytes, dtype=xp.uint32) * 167 + 0x5B) & 0xFF).astype(xp.uint8)


@dataclass
class GuardedArray:
    """An array and the buffer around it: `buffer[:guard]` and `buffer[guard + nbytes:]` are the guards."""

    name: str
    buffer: Array  # uint8
    array: Array
    guard: int

    @property
    def before(self) -> Array:
        return self.buffer[: self.guard]

    @property
    def after(self) -> Array:
        return self.buffer[self.buffer.size - self.guard :]

    def arm(self, pattern: Array) -> None:
        """Write the pattern into both guards."""
        if self.guard:
            self.before[...] = pattern
            self.after[...] = pattern


def allocate(
    name: str, shape: tuple[int, ...], dtype: np.dtype[Any], xp: ModuleType, guard: int = GUARD_BYTES
) -> GuardedArray:
    """An uninitialised array of `shape` and `dtype` with `guard` bytes on each side (not yet armed)."""
    nbytes = math.prod(shape) * dtype.itemsize
    buffer = xp.empty(guard + nbytes + guard, dtype=xp.uint8)
    array = buffer[guard : guard + nbytes].view(dtype).reshape(shape)
    return GuardedArray(name, buffer, array, guard)


@dataclass(frozen=True)
class Breach:
    """Bytes of a guard that changed: a write outside the array."""

    name: str
    side: str  # "before" or "after"
    nbytes: int
    guard: int

    def describe(self) -> str:
        """E.g. "`out`: 12 bytes written after its end (in the 65536-byte guard)"."""
        where = "before its start" if self.side == "before" else "after its end"
        return f"`{self.name}`: {self.nbytes} bytes written {where} (in the {self.guard}-byte guard)"


def breaches(arrays: Sequence[GuardedArray], pattern: Array, xp: ModuleType) -> list[Breach]:
    """Every guard that no longer holds the pattern (re-armed, so the next run starts clean)."""
    guarded = [g for g in arrays if g.guard]
    if not guarded:
        return []
    bands = [band for g in guarded for band in (g.before, g.after)]
    fused = device_checks(xp)
    if fused is not None:
        counts = fused.differing_bytes([(band, pattern) for band in bands])
    else:
        counts = xp.stack([xp.count_nonzero(band != pattern) for band in bands]).tolist()
    found = []
    for i, count in enumerate(counts):  # one transfer for every guard
        if count:
            g = guarded[i // 2]
            found.append(Breach(g.name, ("before", "after")[i % 2], int(count), g.guard))
            g.arm(pattern)
    return found
