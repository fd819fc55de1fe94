"""The clock a run's time budget and phase times are read from: the wall clock, or a replay's own.

A replayed run must come out the same every time (the same recording, command and seed give the same
result, byte for byte), so nothing it decides or reports may depend on how fast the host happens to be:
a replay advances a virtual clock by the time each measurement stands for (its pacing), and the budget,
the phase times and the search's seconds are read from that clock.
"""

from __future__ import annotations

import time


class Clock:
    """Seconds from an arbitrary origin: the host's monotonic clock."""

    virtual = False

    def now(self) -> float:
        """The current reading, in seconds."""
        return time.monotonic()


class VirtualClock(Clock):
    """A clock that moves only when told to: the time replayed measurements stand for."""

    virtual = True

    def __init__(self) -> None:
        self._t = 0.0

    def now(self) -> float:
        """The seconds advanced so far."""
        return self._t

    def advance(self, seconds: float) -> None:
        """Move the clock on by `seconds` (a replayed measurement's duration)."""
        self._t += seconds


WALL = Clock()
