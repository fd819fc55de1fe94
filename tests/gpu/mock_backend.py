"""A stand-in for the GPU backend, for CPU tests of worker isolation: a configuration's `mode` says
what the "kernel" does (finish, hang, crash the process, fault, or hit a backend bug)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence

from cutune.errors import CutuneError
from cutune.gpu.backend import Backend, Check, DeviceInfo, Failure, Job, Measurement, RaggedSizeFailed, Timing
from cutune.spec.ragged import RaggedFailure, RaggedSize
from cutune.template.model import Config

MODES = ("ok", "hang", "crash", "fault", "raise", "flaky")  # flaky: passes evaluate, fails every verify


class ScriptedBackend(Backend):
    """Evaluates configurations by their `mode`; reports its process id, job seed and prefetch hints."""

    name = "scripted"
    needs_isolation = True

    def __init__(self, *, fail_open: bool = False, ragged_fault: bool = False) -> None:
        self.fail_open = fail_open
        self.ragged_fault = ragged_fault  # the "original" faults at a ragged n unless n is a multiple of 8
        self.multiple = 1
        self.seed = -1
        self.prefetched = 0
        self._healthy = True

    def open(self, job: Job) -> DeviceInfo:
        if self.fail_open:
            raise CutuneError("planted open failure")
        self.multiple = job.spec.multiple_of.get("n", 1)
        if self.ragged_fault and self.multiple < 8:
            self._healthy = False  # as after a misaligned access: the process cannot go on
            ragged = RaggedSize({"n": 1023}, 0, ("n",))
            raise RaggedSizeFailed(RaggedFailure(ragged, "fault: planted misaligned address", {"n": 8}))
        self.seed = job.seed
        return DeviceInfo(name=f"scripted pid {os.getpid()}", arch="sm_90", sm_count=1, l2_bytes=0)

    def prefetch(self, configs: Sequence[Config]) -> None:
        self.prefetched += len(configs)

    @property
    def healthy(self) -> bool:
        return self._healthy

    def evaluate(self, config: Config, at: Sequence[int] | None = None) -> Measurement:
        mode = config["mode"]
        if mode == "hang":
            time.sleep(3600)
        elif mode == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif mode == "fault":
            self._healthy = False
            return Measurement(config, failure=Failure.FAULT, detail="planted fault")
        elif mode == "raise":
            raise RuntimeError("planted bug")
        timing = Timing(size={"n": 1}, median_us=1.0, p10_us=1.0, p90_us=1.0, reps=1)
        return Measurement(
            config,
            timings=(timing,),
            extra={
                "pid": os.getpid(),
                "seed": self.seed,
                "prefetched": self.prefetched,
                "multiple": self.multiple,
                "sizes asked": -1 if at is None else len(at),  # -1: every size
            },
        )

    def verify(self, config: Config, seed: int) -> Check:
        """Re-checks: a flaky configuration fails them; other modes behave as in `evaluate`."""
        if config["mode"] == "flaky":
            return Check(config, Failure.RACE, f"planted race, seed {seed}")
        measured = self.evaluate(config)
        return Check(config, measured.failure, f"seed {seed} in pid {os.getpid()}")

    def sanitize(self, configs: Sequence[Config]) -> tuple[Check, ...]:
        """A planted finding for flaky configurations."""
        return tuple(
            Check(c, Failure.OUT_OF_BOUNDS, "compute-sanitizer memcheck: planted finding")
            if c["mode"] == "flaky"
            else Check(c, detail="no error")
            for c in configs
        )
