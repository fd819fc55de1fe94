"""The backend interface: compile, run, check and time one configuration of a kernel."""

from __future__ import annotations

import dataclasses
import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from cutune.errors import CutuneError
from cutune.limits import DeviceLimits
from cutune.spec import KernelSpec
from cutune.spec.ragged import RaggedFailure
from cutune.template.model import Config, Space, Template

if TYPE_CHECKING:
    from cutune.gpu.profile import Profile

RAGGED_ATTEMPTS = 3  # openings of a job whose original fails at a ragged size, each assuming more divisibility


class Failure(enum.Enum):
    """Why a configuration has no valid measurement."""

    INFEASIBLE = "infeasible"  # rejected by constraints or hardware limits before compiling
    COMPILE = "compile"  # the compiler rejected it
    RESOURCES = "resources"  # compiled, but registers/shared memory exceed the device after compiling
    LAUNCH = "launch"  # the launch was refused (e.g. too many resources requested)
    FAULT = "fault"  # the kernel faulted (illegal address, ...); the worker was replaced
    TIMEOUT = "timeout"  # the kernel or compile hung past the per-trial timeout; the worker was replaced
    WRONG = "wrong"  # outputs differ from the reference beyond tolerance
    CRASH = "crash"  # the worker process died for another reason
    OUT_OF_BOUNDS = "out_of_bounds"  # wrote outside an array (a guard region changed, or compute-sanitizer saw it)
    INPUT_WRITTEN = "input_written"  # changed an `in` array
    UNWRITTEN = "unwritten"  # left output elements unwritten (still poisoned, or an inout not written back)
    RACE = "race"  # results differ between runs on the same inputs, or only some checks fail


class Capability(enum.Enum):
    """What a backend can do, declared by its class: front ends ask for a capability, never a name."""

    MEASURE = "measure"  # runs the kernel on a GPU now: timings are measured, not replayed
    # the two below run the backend again in the tool's child process, built with `speed_of_light=False`
    PROFILE = "profile"  # reads a configuration's hardware counters (Nsight Compute)
    SANITIZE = "sanitize"  # runs configurations under compute-sanitizer


@dataclass(frozen=True)
class CompileInfo:
    """What the compiled function uses, read from the compiled code."""

    registers: int
    spill_bytes: int = 0  # spill stores reported by ptxas (nvcc path); NVRTC reports only local_bytes
    shared_bytes: int = 0  # static shared memory per block
    local_bytes: int = 0  # local memory per thread: spills and local arrays
    max_threads_per_block: int = 0  # the most threads per block this function can be launched with
    compile_seconds: float = 0.0
    compiler: str = ""  # "nvrtc" or "nvcc" ("" where not recorded)
    fallback: str = ""  # why NVRTC could not compile it, where compiler "auto" fell back to nvcc


@dataclass(frozen=True)
class Timing:
    """Per-problem-size timing: median and spread (p10..p90) over repetitions, in microseconds."""

    size: dict[str, int]
    median_us: float
    p10_us: float
    p90_us: float
    reps: int

    @property
    def spread(self) -> float:
        """Relative spread (p90 - p10) / median."""
        return (self.p90_us - self.p10_us) / self.median_us if self.median_us > 0 else 0.0


@dataclass(frozen=True)
class Measurement:
    """The outcome of one configuration: timings for every problem size, or why there are none."""

    config: Config
    timings: tuple[Timing, ...] = ()
    compile: CompileInfo | None = None
    failure: Failure | None = None
    detail: str = ""  # human-readable reason / max error / compiler log excerpt
    max_error: float | None = None  # the largest tolerance-scaled error seen on any output (<= 1 passes)
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failure is None and bool(self.timings)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the replay format's record body)."""
        return {
            "config": dict(self.config),
            "timings": [dataclasses.asdict(t) for t in self.timings],
            "compile": dataclasses.asdict(self.compile) if self.compile else None,
            "failure": self.failure.value if self.failure else None,
            "detail": self.detail,
            "max_error": self.max_error,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measurement:
        """The inverse of `to_dict`."""
        compiled = data.get("compile")
        failure = data.get("failure")
        return cls(
            config=Config.of(data["config"]),
            timings=tuple(Timing(**t) for t in data.get("timings", ())),
            compile=CompileInfo(**compiled) if compiled else None,
            failure=Failure(failure) if failure else None,
            detail=data.get("detail", ""),
            max_error=data.get("max_error"),
            extra=dict(data.get("extra", {})),
        )


@dataclass(frozen=True)
class Check:
    """The outcome of checking a configuration without timing it (fresh inputs, or compute-sanitizer)."""

    config: Config
    failure: Failure | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.failure is None


TIMING_MODES = ("events", "graph")


@dataclass(frozen=True)
class TimingOptions:
    """How to time: warm-up, repetitions, L2 flush (default on), per-trial timeout, and the mode.

    `mode` "events": CUDA events around each single launch, after an L2 flush; the repetitions cycle through
    a few copies of the arguments (harness.PLACEMENTS), so one measurement averages buffer placements.
    "graph": each repetition times `graph_launches` back-to-back launches captured in a CUDA graph, as serving
    frameworks run decode steps, over input copies rotated so that the L2 holds no earlier launch's data; the
    time per launch is reported, and the floor's empty launch is timed the same way."""

    warmup: int = 3
    reps: int = 30
    min_time_ms: float = 20.0  # keep repeating until at least this much kernel time is measured
    max_reps: int = 2000  # ...but never more repetitions than this per problem size
    flush_l2: bool = True
    trial_timeout_s: float = 60.0
    mode: str = "events"  # one of TIMING_MODES
    graph_launches: int = 32  # launches per graph (mode "graph")

    def __post_init__(self) -> None:
        if self.mode not in TIMING_MODES:
            raise CutuneError(f"unknown timing {self.mode!r}; choose one of {', '.join(TIMING_MODES)}")
        if self.graph_launches < 1:
            raise CutuneError(f"a graph needs at least one launch, not {self.graph_launches}")


@dataclass(frozen=True)
class Job:
    """Everything a backend needs to evaluate configurations of one kernel."""

    source_path: str | None
    template: Template
    spec: KernelSpec
    space: Space
    arch: str | None = None
    timing: TimingOptions = field(default_factory=TimingOptions)
    seed: int = 0  # input data seed; a replaced worker reopens with a different one (fresh inputs)


@dataclass(frozen=True)
class DeviceInfo:
    """The device a backend measures on, and its speed-of-light ingredients."""

    name: str
    arch: str
    sm_count: int
    l2_bytes: int
    copy_bandwidth_gbs: float = 0.0  # measured device-to-device copy, bytes read + written
    empty_launch_us: float = 0.0  # measured empty kernel launch in the same harness
    driver: str = ""
    limits: DeviceLimits | None = None  # the live device's limits, where the backend reads them
    notes: tuple[str, ...] = ()  # what opening the job found that the user should know (a ragged size dropped)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = dataclasses.asdict(self)
        data["limits"] = dataclasses.asdict(self.limits) if self.limits else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeviceInfo:
        """The inverse of `to_dict`."""
        limits = data.get("limits")
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known and k not in ("limits", "notes")}
        notes = tuple(data.get("notes", ()))
        return cls(**values, limits=DeviceLimits(**limits) if limits else None, notes=notes)


class RaggedSizeFailed(CutuneError):
    """The original failed at a ragged size and its process cannot go on (the CUDA context is lost): whoever
    opens the job again should assume the failure's `multiple_of`."""

    def __init__(self, failure: RaggedFailure) -> None:
        super().__init__(failure.message())
        self.failure = failure

    def __reduce__(self) -> tuple[type[RaggedSizeFailed], tuple[RaggedFailure]]:
        return (type(self), (self.failure,))


class Backend(ABC):
    """Compiles, runs, checks and times configurations.

    Lifecycle: `open(job)` once (allocates, builds the reference), then `evaluate(config[, at])` per
    configuration (never raises for a bad configuration: returns a Measurement with a Failure), then
    `close()`. `prefetch(configs)` may be called at any time after `open` to say which configurations
    come next. Backends are not thread-safe; use one per worker. After a FAULT a backend may be
    unusable (`healthy` is False): the isolated worker then replaces its process.
    """

    name: ClassVar[str]
    needs_isolation: ClassVar[bool] = False  # True: run it in a worker process (it can fault or hang)
    capabilities: ClassVar[frozenset[Capability]] = frozenset()

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this backend cannot run on this machine (no GPU, say), or None where it can."""
        return None

    def can(self, capability: Capability) -> bool:
        """Whether this backend (a wrapper: the backend it wraps) declares `capability`."""
        return capability in self.capabilities

    @abstractmethod
    def open(self, job: Job) -> DeviceInfo:
        """Prepare for a job and describe the device."""

    @abstractmethod
    def evaluate(self, config: Config, at: Sequence[int] | None = None) -> Measurement:
        """Measure one configuration on every problem size of the job, or only at the sizes `at` (indices into
        the job's sizes, ascending; no ragged tails then), whose timings it returns in that order."""

    def prefetch(self, configs: Sequence[Config]) -> None:
        """Hint that these configurations come next (a backend may compile them ahead); default: ignore."""
        del configs

    def verify(self, config: Config, seed: int) -> Check | None:
        """Re-check `config` on fresh inputs drawn from `seed`, against a fresh reference; None where this
        backend runs no kernels (replay), so there is nothing new to check."""
        del config, seed
        return None

    def sanitize(self, configs: Sequence[Config]) -> tuple[Check, ...] | None:
        """Run each configuration under compute-sanitizer (memcheck, racecheck) at one size: a check per
        configuration; None where this backend runs no kernels or the tool is absent."""
        del configs
        return None

    def profile(self, job: Job, config: Config) -> Profile | None:
        """Hardware counters of one launch of `config` (see `gpu.profile`); None where this backend runs
        no kernels (it lacks Capability.PROFILE)."""
        del job, config
        return None

    @property
    def healthy(self) -> bool:
        """Whether the backend can go on evaluating (False once a fault poisoned its CUDA context)."""
        return True

    def close(self) -> None:  # noqa: B027 - most backends hold nothing to release
        """Release resources."""
