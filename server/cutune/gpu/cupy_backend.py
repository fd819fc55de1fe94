"""The CuPy backend: compile with NVRTC (or nvcc), check against the original kernel, time with CUDA events.

Checks (all untimed): every array inside guard regions, `in` arrays compared with their pristine copy,
outputs against the validated reference at the spec's sizes and at derived ragged sizes; a failing
configuration is run once more to tell a race from a deterministic bug. `verify` re-checks on fresh
inputs; `sanitize` runs compute-sanitizer in a fresh process. CuPy is imported when a job is opened,
never at module import, so cutune imports without a GPU.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property, partial
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from cutune.errors import CutuneError, NoGpuError, ReferenceInvalid
from cutune.gpu.backend import (
    RAGGED_ATTEMPTS,
    Backend,
    Capability,
    Check,
    CompileInfo,
    DeviceInfo,
    Failure,
    Job,
    Measurement,
    RaggedSizeFailed,
    Timing,
)
from cutune.gpu.build import BuildKey, JobBuilder
from cutune.gpu.compile import check_choice
from cutune.gpu.compile_cache import CompileCache
from cutune.gpu.compiler import CompiledKernel
from cutune.gpu.device import device_count, device_limits, gpu_available
from cutune.gpu.device_checks import load_cubin
from cutune.gpu.guards import GUARD_BYTES
from cutune.gpu.harness import (
    MAX_ROTATION,
    PLACEMENTS,
    POISON,
    POISON_2,
    Problem,
    Timer,
    compare,
    make_problem,
    real_inputs,
    rotated_args,
    rotation_count,
    summarize,
    tolerance_for,
)
from cutune.gpu.launch_ex import DependentLaunch
from cutune.gpu.nvcc import excerpt
from cutune.gpu.occupancy import occupancy
from cutune.gpu.sol import cache_dir, device_info
from cutune.limits import DeviceLimits
from cutune.spec import Role
from cutune.spec.ragged import ragged_failure, ragged_sizes
from cutune.template.model import PDL, Config

if TYPE_CHECKING:
    from cutune.gpu.profile import Profile

T = TypeVar("T")
# failures of a checked run (not of compiling or launching): a run that passed before and fails now is a race
_CHECK_FAILURES = frozenset({Failure.WRONG, Failure.UNWRITTEN, Failure.OUT_OF_BOUNDS, Failure.INPUT_WRITTEN})
# CUDA errors after which the context is unusable: the process must go (cudaError / CUresult codes).
_STICKY = frozenset({700, 702, 710, 714, 715, 716, 717, 718, 719, 999})


class _Failed(Exception):
    """Ends an evaluation early with a typed failure."""

    def __init__(self, failure: Failure, detail: str, max_error: float | None = None) -> None:
        super().__init__(detail)
        self.failure = failure
        self.detail = detail
        self.max_error = max_error


@dataclass
class _Module:
    """A compiled configuration: one function per name expression, or the compiler's complaint."""

    functions: dict[str, Any] = field(default_factory=dict)
    info: dict[str, CompileInfo] = field(default_factory=dict)
    error: str = ""
    fallback: str = ""  # with compiler "auto": why NVRTC could not compile it (nvcc did)


class CupyBackend(Backend):
    """Compiles each configuration through the compiler layer (`gpu/build.py`: what `check` compiles), loads
    the binary with CuPy, checks and times it on the GPU.

    Options: `compiler` ("auto": NVRTC, and nvcc for a unit NVRTC cannot compile; "nvrtc"; "nvcc"),
    `device` (CUDA ordinal), `compile_workers` (threads that compile prefetched configurations while the
    GPU measures others), `checks` (False drops guards, ragged sizes, reference validation and the
    race re-run: only to measure what they cost), `verify_repeats` (checked runs per fresh seed),
    `speed_of_light` (False: the device's floor is neither measured nor read; a tool's child process runs so).
    """

    name = "cupy"
    needs_isolation = True
    capabilities = frozenset({Capability.MEASURE, Capability.PROFILE, Capability.SANITIZE})

    @classmethod
    def unavailable(cls) -> str | None:
        """Why it cannot measure here: no CuPy, or no CUDA device."""
        return None if gpu_available() else "measured tuning needs a CUDA GPU"

    def __init__(
        self,
        *,
        compiler: str = "auto",
        device: int = 0,
        compile_workers: int = 4,
        checks: bool = True,
        verify_repeats: int = 2,
        speed_of_light: bool = True,
    ) -> None:
        self.compiler = check_choice(compiler)
        self.device = device
        self.compile_workers = compile_workers
        self.checks = checks
        self.verify_repeats = verify_repeats
        self.speed_of_light = speed_of_light
        self.nvrtc_failed = ""  # with "auto": why NVRTC could not compile a configuration (nvcc did)
        self._healthy = True
        self._cp: ModuleType | None = None
        self._job: Job | None = None
        self._limits: DeviceLimits | None = None
        self._timer: Timer | None = None
        self._builder: JobBuilder | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._modules: dict[BuildKey, Future[_Module]] = {}
        self._problems: list[Problem] = []
        self._fresh: tuple[int, list[Problem]] | None = None  # verify's problems, for one seed
        # the argument copies timing cycles through, per problem size
        self._rotations: dict[tuple[tuple[str, int], ...], list[list[Any]]] = {}
        # event timing's placements at most (1: every repetition on the problem's own buffers)
        self.placements = PLACEMENTS

    @property
    def healthy(self) -> bool:
        return self._healthy

    def open(self, job: Job) -> DeviceInfo:
        """Start CUDA, measure (or read) the speed of light, compile the original and build the reference.

        Where the original fails at a ragged size, the job goes on assuming the `multiple_of` it evidently
        needs (the returned notes say so); where that failure lost the CUDA context, RaggedSizeFailed asks
        the caller (the isolated worker) to reopen the job in a fresh process with that assumption."""
        self._start(job)
        assert self._limits is not None
        self._timer = Timer(self._limits.l2_bytes)
        info = device_info(self._timer, self.device, graph=job.timing.mode == "graph", measure=self.speed_of_light)
        self._rotations = {}
        real = real_inputs(job.spec)
        notes: list[str] = [real] if real else []
        for attempt in range(RAGGED_ATTEMPTS):
            try:
                self._problems = self._reference(job.seed)
                return dataclasses.replace(info, notes=tuple(notes))
            except RaggedSizeFailed as e:
                if not self._healthy:
                    raise
                spec, note = e.failure.apply(job.spec, last=attempt >= RAGGED_ATTEMPTS - 2)
                notes.append(note)
                job = self._job = dataclasses.replace(job, spec=spec)
        raise CutuneError(f"{notes[-1]}; still failing after {RAGGED_ATTEMPTS} attempts")

    def run_each(
        self, job: Job, configs: Sequence[Config], size: dict[str, int], before: Callable[[int], None]
    ) -> Iterator[bool]:
        """Run each configuration once at `size` on exactly-sized arrays (no guards), calling `before(i)`
        first; yields whether each ran. This is what compute-sanitizer watches."""
        self._start(job)
        cp = self._cp
        assert cp is not None
        problem = make_problem(job.spec, size, cp.random.default_rng(job.seed), cp, guard_bytes=0)
        for i, config in enumerate(configs):
            before(i)
            try:
                launches, _ = self._prepare(config, [problem])
                self._run_checked(problem, launches[0])
            except _Failed:
                yield False
                if not self._healthy:
                    return
                continue
            yield True

    def _start(self, job: Job) -> None:
        cp = self._cp = _import_cupy()
        cp.cuda.Device(self.device).use()
        self._limits = device_limits(self.device)
        self._job = job
        cache = CompileCache(cache_dir() / "compile")
        self._builder = JobBuilder(job, arch=self._limits.arch, compiler=self.compiler, cache=cache)
        self._pool = ThreadPoolExecutor(
            self.compile_workers,
            thread_name_prefix="cutune-compile",
            initializer=lambda: cp.cuda.Device(self.device).use(),
        )

    def _reference(self, seed: int) -> list[Problem]:
        """Problems on inputs drawn from `seed` (spec sizes, then ragged ones), with validated references."""
        job = self._require_job()
        cp = self._cp
        assert cp is not None
        rng = cp.random.default_rng(seed)
        guard = GUARD_BYTES if self.checks else 0
        problems = [make_problem(job.spec, size, rng, cp, guard_bytes=guard) for size in job.spec.sizes]
        ragged = ragged_sizes(job.spec) if self.checks else ()
        problems += [
            make_problem(job.spec, r.size, rng, cp, guard_bytes=guard, timed=False, base=r.base) for r in ragged
        ]
        original = job.space.default()
        try:
            launches, _ = self._prepare(original, problems)
        except _Failed as e:
            raise CutuneError(
                f"the original configuration ({original}) cannot serve as the reference: {e.failure.value}: {e.detail}"
            ) from None
        for i, (problem, launch) in enumerate(zip(problems, launches, strict=True)):
            try:
                self._run_checked(problem, launch)
                problem.keep_reference()
                if self.checks:
                    self._run_checked(problem, launch, POISON_2)
                    second = problem.snapshot()
                    rerun = partial(self._run_poisoned, problem, launch)
                    self._guard(partial(problem.validate_reference, job.spec, second, cp, rerun))
            except (_Failed, ReferenceInvalid) as e:
                failure = f"{e.failure.value}: {e.detail}" if isinstance(e, _Failed) else f"no reference: {e}"
                if i >= len(job.spec.sizes):  # a ragged size cutune added itself: the spec's sizes passed
                    raise RaggedSizeFailed(ragged_failure(job.spec, ragged[i - len(job.spec.sizes)], failure)) from None
                if isinstance(e, ReferenceInvalid):
                    raise
                raise CutuneError(
                    f"the original configuration ({original}) cannot serve as the reference: {failure}"
                ) from None
        return problems

    def prefetch(self, configs: Sequence[Config]) -> None:
        """Start compiling these configurations in the background."""
        for config in configs:
            try:
                self._compiled(self._compile_key(config)[0])
            except _Failed:
                continue  # evaluate() reports it

    def evaluate(self, config: Config, at: Sequence[int] | None = None) -> Measurement:
        """Compile (or take the prefetched module), check every size (those `at` names) against the
        reference, then time."""
        job = self._require_job()
        compiled: CompileInfo | None = None
        problems = self._problems if at is None else [self._problems[i] for i in at]
        try:
            launches, compiled = self._prepare(config, self._problems, at)
            max_error = self._check(launches, problems)
            timings = tuple(
                self._time(problem, launch) for problem, launch in zip(problems, launches, strict=True) if problem.timed
            )
        except _Failed as e:
            return Measurement(config, compile=compiled, failure=e.failure, detail=e.detail, max_error=e.max_error)
        return Measurement(
            config,
            timings=timings,
            compile=compiled,
            max_error=max_error,
            detail=f"max scaled error {max_error:.3g}" if job.spec.sizes else "",
        )

    def verify(self, config: Config, seed: int) -> Check:
        """Check `config` `verify_repeats` times on inputs from `seed` against a fresh reference.

        A configuration that passes some of these runs and fails others (or gives different results on
        the same inputs) is a RACE; one that fails every run fails with its own class.
        """
        if self._fresh is None or self._fresh[0] != seed:
            self._fresh = None  # free the previous seed's arrays first
            self._fresh = (seed, self._reference(seed))
        problems = self._fresh[1]
        passed = 0
        try:
            launches, _ = self._prepare(config, problems)
            for _ in range(max(self.verify_repeats, 1)):
                self._check(launches, problems)
                passed += 1
        except _Failed as e:
            failure, detail = e.failure, e.detail
            if passed and failure in _CHECK_FAILURES:
                failure, detail = (
                    Failure.RACE,
                    f"passed {passed} checked run(s), then failed on the same inputs: {detail}",
                )
            return Check(config, failure, f"on fresh inputs (seed {seed}): {detail}")
        return Check(config, detail=f"passed {passed} checked runs on fresh inputs (seed {seed})")

    def sanitize(self, configs: Sequence[Config]) -> tuple[Check, ...] | None:
        """Run the configurations under compute-sanitizer in a fresh process (None where the tool is absent)."""
        from cutune.gpu.sanitize import sanitize_job

        return sanitize_job(self._require_job(), configs, backend=self.name, options=self._child_options())

    def profile(self, job: Job, config: Config) -> Profile | None:
        """Nsight Compute counters of `config`, from a launcher process running this backend under ncu."""
        from cutune.gpu.profile import profile_config

        return profile_config(job, config, backend=self.name, options=self._child_options())

    def _child_options(self) -> dict[str, Any]:
        """The options that build this backend again in a tool's child process (one compile thread)."""
        return {"compiler": self.compiler, "device": self.device, "compile_workers": 1}

    def close(self) -> None:
        """Stop the compile threads and free the device memory of this job."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self._modules.clear()
        self._problems = []
        self._fresh = None
        if self._cp is not None and self._healthy:
            self._cp.get_default_memory_pool().free_all_blocks()

    # -- compiling -------------------------------------------------------------------------------

    def _require_job(self) -> Job:
        if self._job is None:
            raise CutuneError("the cupy backend has no job; call open() first")
        return self._job

    def _compile_key(self, config: Config, problems: Sequence[Problem] | None = None) -> tuple[BuildKey, list[str]]:
        """The build key of a configuration and the name expression each problem launches."""
        assert self._builder is not None
        sizes = [p.size for p in (self._problems if problems is None else problems)]
        try:
            return self._builder.key(config, sizes)
        except CutuneError as e:
            raise _Failed(Failure.INFEASIBLE, str(e)) from None

    def _compiled(self, key: BuildKey) -> Future[_Module]:
        if key not in self._modules:
            assert self._pool is not None
            self._modules[key] = self._pool.submit(self._compile, key)
        return self._modules[key]

    def _compile(self, key: BuildKey) -> _Module:
        """Compile one key (in a worker thread) and load its binaries; errors become the module's `error`."""
        assert self._builder is not None
        try:
            compiled = self._builder.compile(key)
        except CutuneError as e:
            return _Module(error=excerpt(str(e)))
        except Exception as e:  # extraction or the compiler library itself: this configuration's compile fails
            return _Module(error=f"{type(e).__name__}: {e}")
        if compiled.fallback:
            self.nvrtc_failed = compiled.fallback
        out = _Module(fallback=compiled.fallback)
        try:
            for kernel in compiled.kernels:
                function = self._load(kernel)
                out.functions[kernel.name] = function
                out.info[kernel.name] = _compile_info(function, kernel, compiled.compiler)
        except Exception as e:  # a binary the driver cannot load fails this configuration's compile
            return _Module(error=f"loading the compiled kernel: {type(e).__name__}: {e}")
        return out

    def _load(self, kernel: CompiledKernel) -> Any:
        """The kernel's function, from its cubin loaded by CuPy (found by its mangled name)."""
        cp = self._cp
        assert cp is not None
        return load_cubin(cp, kernel.binary).get_function(kernel.function)

    # -- running ---------------------------------------------------------------------------------

    def _prepare(
        self, config: Config, problems: Sequence[Problem], at: Sequence[int] | None = None
    ) -> tuple[list[_Launch], CompileInfo]:
        """Compiled launches for every problem (those `at` names: the module is still the one built for all
        of them), after the resource checks."""
        job = self._require_job()
        key, per_size = self._compile_key(config, problems)
        module = self._compiled(key).result()
        if module.error:
            raise _Failed(Failure.COMPILE, module.error)
        assert self._limits is not None
        limits = self._limits
        numeric = {k: v for k, v in config.items() if not isinstance(v, str)}
        launches = []
        for i in range(len(problems)) if at is None else at:
            problem, function = problems[i], module.functions[per_size[i]]
            try:
                grid, block, smem = job.spec.launch({**problem.size, **numeric, **limits.as_names()})
            except CutuneError as e:
                raise _Failed(Failure.INFEASIBLE, str(e)) from None
            threads = math.prod(block)
            if threads > function.max_threads_per_block:
                raise _Failed(
                    Failure.RESOURCES,
                    f"{threads} threads per block exceed this function's limit of "
                    f"{function.max_threads_per_block} ({function.num_regs} registers per thread)",
                )
            fits = occupancy(limits, threads, function.num_regs, function.shared_size_bytes + smem)
            if fits.blocks_per_sm == 0:
                raise _Failed(Failure.RESOURCES, fits.message or "no block fits on one SM")
            if smem > limits.max_smem_per_block:
                self._guard(partial(setattr, function, "max_dynamic_shared_size_bytes", smem))
            launches.append(_launcher(function, grid, block, smem, problem.args, bool(config.get(PDL, False))))
        info = module.info[per_size[0]]
        return launches, dataclasses.replace(info, fallback=module.fallback) if module.fallback else info

    def _check(self, launches: Sequence[Callable[[], None]], problems: Sequence[Problem]) -> float:
        """Run every problem once on pristine inputs and poisoned outputs; fail with the class of the first
        failure (a failing run is repeated once: results that differ between the two are a RACE)."""
        job = self._require_job()
        cp = self._cp
        assert cp is not None
        worst = 0.0
        for problem, launch in zip(problems, launches, strict=True):
            self._run_checked(problem, launch)
            verdict = self._guard(partial(problem.verdict, job.spec, cp))
            worst = max(worst, verdict.max_scaled)
            if verdict.ok:
                continue
            failure, detail = verdict.failure, verdict.detail
            if self.checks and (race := self._differs_on_rerun(problem, launch)):
                failure, detail = Failure.RACE, f"{race}; first run: {detail}"
            assert failure is not None
            raise _Failed(failure, detail, worst)
        return worst

    def _differs_on_rerun(self, problem: Problem, launch: Callable[[], None]) -> str:
        """Run again on the same inputs; say how the outputs differ from the first run ("" if they do not)."""
        job = self._require_job()
        cp = self._cp
        assert cp is not None
        first = problem.snapshot()
        self._run_checked(problem, launch)
        for a in problem.outputs:
            same = self._guard(
                partial(compare, problem.arrays[a.name], first[a.name], a.dtype, tolerance_for(job.spec, a), cp)
            )
            if not same.ok:
                return (
                    f"at {problem.label}: `{a.name}` differs between two runs on the same inputs in "
                    f"{same.mismatches} of {same.total} elements (a race or nondeterminism)"
                )
        return ""

    def _run_checked(self, problem: Problem, launch: Callable[[], None], byte: int = POISON) -> None:
        cp = self._cp
        assert cp is not None

        def run() -> None:
            problem.prepare_checked_run(cp, byte)
            launch()
            cp.cuda.get_current_stream().synchronize()

        self._guard(run)

    def _run_poisoned(self, problem: Problem, launch: Callable[[], None], poisons: Mapping[str, int]) -> None:
        cp = self._cp
        assert cp is not None
        problem.prepare_checked_run(cp, poisons=poisons)
        launch()
        cp.cuda.get_current_stream().synchronize()

    def _time(self, problem: Problem, launch: _Launch) -> Timing:
        job = self._require_job()
        cp = self._cp
        assert cp is not None and self._timer is not None
        timer = self._timer
        if job.timing.mode == "graph":
            launches = [launch.on(args) for args in self._rotation(problem)]
            samples = self._guard(lambda: timer.time_graph(launches, job.timing))
            median, p10, p90 = summarize(samples)
            return Timing(size=dict(problem.size), median_us=median, p10_us=p10, p90_us=p90, reps=len(samples))
        inout = any(a.role is Role.INOUT for a in problem.specs)
        before = (lambda: problem.restore(cp, inputs=False)) if inout else None
        # in-place arrays are restored before each repetition: those are timed on the problem's own buffers only
        turn = itertools.cycle([launch] if inout else [launch.on(a) for a in self._rotation(problem, self.placements)])

        def timed() -> None:
            next(turn)()

        samples = self._guard(lambda: timer.time(timed, job.timing, before))
        median, p10, p90 = summarize(samples)
        return Timing(size=dict(problem.size), median_us=median, p10_us=p10, p90_us=p90, reps=len(samples))

    def _rotation(self, problem: Problem, most: int = MAX_ROTATION) -> list[list[Any]]:
        """The argument lists timing cycles through at this problem's size, at most `most` (built once per size:
        a job times in one mode)."""
        cp = self._cp
        assert cp is not None and self._limits is not None
        key = tuple(sorted(problem.size.items()))
        if key not in self._rotations:
            launch_bytes = sum(a.nbytes for a in problem.arrays.values())
            copies = min(most, rotation_count(launch_bytes, self._limits.l2_bytes))
            self._rotations[key] = rotated_args(problem, copies, cp)
        return self._rotations[key]

    def _guard(self, action: Callable[[], T]) -> T:
        """Run GPU work; CUDA errors become FAULT (the context is lost) or LAUNCH failures."""
        cp = self._cp
        assert cp is not None
        try:
            return action()
        except (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError) as e:
            if getattr(e, "status", None) in _STICKY:
                self._healthy = False
                raise _Failed(Failure.FAULT, f"{e}; the CUDA context is lost") from None
            raise _Failed(Failure.LAUNCH, str(e)) from None


@dataclass(frozen=True)
class _Launch:
    """One compiled function's launch at one size, on given arguments; rebound to input copies under graph
    timing."""

    function: Any
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    args: tuple[Any, ...]
    dependent: bool = False  # launched with programmatic stream serialization (programmatic dependent launch)

    def __call__(self) -> None:
        if self.dependent:
            import cupy

            self._dependent(cupy.cuda.get_current_stream().ptr)
        else:
            self.function(self.grid, self.block, self.args, shared_mem=self.smem)

    @cached_property
    def _dependent(self) -> DependentLaunch:
        return DependentLaunch(self.function, self.grid, self.block, self.smem, self.args)

    def on(self, args: Sequence[Any]) -> _Launch:
        """The same launch on other arguments."""
        return dataclasses.replace(self, args=tuple(args))


def _launcher(
    function: Any,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    smem: int,
    args: Sequence[Any],
    dependent: bool = False,
) -> _Launch:
    return _Launch(function, grid, block, smem, tuple(args), dependent)


def _compile_info(function: Any, kernel: CompiledKernel, compiler: str) -> CompileInfo:
    return CompileInfo(
        compiler=compiler,
        registers=function.num_regs,
        spill_bytes=kernel.resources.spill_store_bytes,
        shared_bytes=function.shared_size_bytes,
        local_bytes=function.local_size_bytes,
        max_threads_per_block=function.max_threads_per_block,
        compile_seconds=kernel.resources.compile_seconds,
    )


def _import_cupy() -> ModuleType:
    if device_count() == 0:
        raise NoGpuError("CuPy sees no CUDA device")
    import cupy

    return cupy
