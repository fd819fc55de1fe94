"""A stand-in for the GPU, for CPU tests of the measured agent loop (this machine has none): times each
configuration from a per-variant factor, and fails the variants it is told to (wrong, faulting, hanging)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from cutune.gpu.backend import Backend, DeviceInfo, Failure, Job, Measurement, Timing
from cutune.template.model import Config

ORIGINAL_US = 400.0  # every size of the original takes this long: far from the floor


@dataclass
class MockGpuBackend(Backend):
    """Variant name → time factor (default 1.0; a function of the size for a variant that wins only at some
    sizes) or failure; records every configuration it evaluated."""

    speed: dict[str, float | Callable[[Mapping[str, int]], float]] = field(default_factory=dict)
    failures: dict[str, tuple[Failure, str]] = field(default_factory=dict)
    evaluated: list[tuple[str, Config]] = field(default_factory=list)
    name = "mock-gpu"

    def open(self, job: Job) -> DeviceInfo:
        self._job = job
        return DeviceInfo("Mock GPU", "sm_90", 132, 60 << 20, copy_bandwidth_gbs=4260.0, empty_launch_us=2.9)

    def evaluate(self, config: Config, at: Sequence[int] | None = None) -> Measurement:
        variant = self._variant(config)
        self.evaluated.append((variant, config))
        if variant in self.failures:
            failure, detail = self.failures[variant]
            return Measurement(config, failure=failure, detail=detail)
        factor = self.speed.get(variant, 1.0)
        timings = []
        sizes = self._job.spec.sizes
        for size in sizes if at is None else [sizes[i] for i in at]:
            us = ORIGINAL_US * (factor(size) if callable(factor) else factor)
            timings.append(Timing(dict(size), us, us * 0.995, us * 1.005, 30))
        return Measurement(config, timings=tuple(timings), max_error=0.1)

    def _variant(self, config: Config) -> str:
        """The name of the configuration's variant, from the VARIANT parameter's description."""
        k = config.get("VARIANT", 0)
        if k == 0:
            return "original"
        description = next(p.description for p in self._job.space.params if p.name == "VARIANT")
        return dict(part.split(" = ") for part in description.split("; "))[str(k)]
