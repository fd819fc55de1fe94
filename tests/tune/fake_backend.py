"""A stand-in Backend for the search tests: times from a deterministic table, no GPU.

The table is shaped like a real memory-bound kernel on an H200: a float32 scale moving 8 MB
(N = 2**20) and 128 MB (N = 2**24), whose original runs at about 2.3× and 1.5× its speed-of-light
floor (4.9 µs and 34.4 µs at 4.26 TB/s plus a 2.9 µs launch); vector width matters most, threads per
block little. Stand-in until recorded measurements (gpu/replay.py) exist for this kernel.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from cutune.gpu.backend import Backend, DeviceInfo, Failure, Job, Measurement, Timing
from cutune.spec import ArgSpec, KernelSpec, Role
from cutune.template.model import Config, Space, Template, TunableParam

SIZES = ({"N": 1 << 20}, {"N": 1 << 24})
BASE_US = {1 << 20: 11.0, 1 << 24: 52.0}  # the original configuration's median per size
# relative time per parameter value (the original's values are 1.0)
FACTORS: dict[str, dict[int, float]] = {
    "THREADS": {64: 1.04, 128: 1.0, 256: 1.0, 512: 1.01, 1024: 1.06, 2048: 1.0},
    "VEC": {1: 1.0, 2: 0.86, 4: 0.78, 8: 0.80},
    "UNROLL": {1: 1.0, 2: 0.97, 4: 1.08},
}
DEVICE = DeviceInfo(
    name="Fake H200 (table)",
    arch="sm_90",
    sm_count=132,
    l2_bytes=60 * 2**20,
    copy_bandwidth_gbs=4260.0,
    empty_launch_us=2.9,
)

SPACE = Space(
    params=(
        TunableParam("THREADS", (64, 128, 256, 512, 1024, 2048), 256),
        TunableParam("VEC", (1, 2, 4, 8), 1),
        TunableParam("UNROLL", (1, 2, 4), 1),
    )
)
SPEC = KernelSpec(
    kernel="scale",
    args=(
        ArgSpec("x", "float32", Role.IN, shape=("N",)),
        ArgSpec("y", "float32", Role.OUT, shape=("N",)),
        ArgSpec("n", "int32", value="N"),
    ),
    sizes=SIZES,
    grid=("ceil_div(N, THREADS * VEC * UNROLL)",),
    block=("THREADS",),  # THREADS = 2048 breaks the hardware limit of 1024 threads per block
    constraints=("VEC * UNROLL <= 16",),  # VEC = 8 with UNROLL = 4 breaks the spec
)
SOURCE = "template <int THREADS, int VEC, int UNROLL> __global__ void scale(const float* x, float* y, int n);"


def make_job(*, source: str = SOURCE, spec: KernelSpec = SPEC, space: Space = SPACE) -> Job:
    """A job for the table's kernel."""
    return Job(
        source_path="/work/kernels/scale.cu",
        template=Template("scale", source, space),
        spec=spec,
        space=space,
        arch="sm_90",
    )


def table_time(config: Mapping[str, object], size: Mapping[str, int]) -> float:
    """The noise-free median of a configuration at a size, in µs."""
    n = size["N"]
    # between and beyond the table's sizes (held-out sizes): a power law through its two points
    t = BASE_US.get(n) or BASE_US[1 << 20] * (n / (1 << 20)) ** (np.log(52.0 / 11.0) / np.log(16))
    for name, factors in FACTORS.items():
        t *= factors[config[name]]  # type: ignore[index]
    return t


class FakeBackend(Backend):
    """Answers from `time_of` (the table by default) with seeded multiplicative noise; counts calls."""

    name = "fake"

    def __init__(
        self,
        *,
        noise: float = 0.005,
        seed: int = 0,
        time_of: Callable[[Config, Mapping[str, int]], float] = table_time,
        failures: Mapping[Config, Failure] | None = None,
        sleep_s: float = 0.0,
        cancel_after: tuple[int, threading.Event] | None = None,
        interrupt_on: Config | None = None,
        device: DeviceInfo = DEVICE,
    ) -> None:
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self.time_of = time_of
        self.failures = dict(failures or {})
        self.sleep_s = sleep_s
        self.cancel_after = cancel_after
        self.interrupt_on = interrupt_on
        self.device = device
        self.calls: list[Config] = []
        self.at: list[Sequence[int] | None] = []  # the sizes asked for, by call (None: every size)
        self.opened = self.closed = 0
        self.specs: list[KernelSpec] = []  # the spec of each open, in order

    def open(self, job: Job) -> DeviceInfo:
        self.sizes = job.spec.sizes
        self.specs.append(job.spec)
        self.opened += 1
        return self.device

    def evaluate(self, config: Config, at: Sequence[int] | None = None) -> Measurement:
        if config == self.interrupt_on:
            raise KeyboardInterrupt
        self.calls.append(config)
        self.at.append(at)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        if self.cancel_after is not None and len(self.calls) >= self.cancel_after[0]:
            self.cancel_after[1].set()
        if config in self.failures:
            return Measurement(config, failure=self.failures[config], detail="table says so")
        timings = []
        for size in self.sizes if at is None else [self.sizes[i] for i in at]:
            median = self.time_of(config, size) * (1.0 + self.noise * float(self.rng.standard_normal()))
            timings.append(
                Timing(
                    size=dict(size),
                    median_us=median,
                    p10_us=median * (1 - 2 * self.noise),
                    p90_us=median * (1 + 2 * self.noise),
                    reps=100,
                )
            )
        return Measurement(config, timings=tuple(timings))

    def close(self) -> None:
        self.closed += 1
