"""The CuPy backend: compile with NVRTC (or nvcc), check against the original kernel, time with CUDA events.

Checks (all untimed): every array inside guard regions, `in` arrays compared with their pristine copy,
outputs against the validated reference at the spec's sizes and at derived ragged sizes; a failing
configuration is run once more to tell a race from a deterministic bug. `verify` re-checks on fresh
inputs; `sanitize` runs compute-sanitizer in a fresh process. CuPy is imported when a job is opened,
never at module import, so cutune imports without a GPU.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from cutune.cuda.extract import CompileUnit, extract_kernel, qualified_name
from cutune.cuda.model import Kernel, SourceModel
from cutune.cuda.parse import parse_source
from cutune.errors import CutuneError, NoGpuError
from cutune.gpu.backend import Backend, Check, CompileInfo, DeviceInfo, Failure, Job, Measurement, Timing
from cutune.gpu.device import device_count, device_limits
from cutune.gpu.guards import GUARD_BYTES
from cutune.gpu.harness import (
    POISON,
    POISON_2,
    Problem,
    Timer,
    compare,
    make_problem,
    rotated_args,
    rotation_count,
    summarize,
    tolerance_for,
)
from cutune.gpu.limits import DeviceLimits
from cutune.gpu.nvcc import DEFAULT_FLAGS as NVCC_FLAGS
from cutune.gpu.nvcc import _excerpt
from cutune.gpu.occupancy import occupancy
from cutune.gpu.resources import parse_ptxas, pick_entry
from cutune.gpu.sol import cache_dir, device_info
from cutune.template.instantiate import compile_options, instantiation
from cutune.template.model import Config
from cutune.template.spec import Role
from cutune.template.spec.ragged import ragged_sizes

COMPILERS = ("auto", "nvrtc", "nvcc")
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


@dataclass(frozen=True)
class _CompileKey:
    """What decides the compiled code: the instantiations and the compiler options."""

    expressions: tuple[str, ...]  # unique name expressions, in first-use order
    flags: tuple[str, ...]
    defines: tuple[tuple[str, str], ...]


@dataclass
class _Module:
    """A compiled configuration: one function per name expression, or the compiler's complaint."""

    functions: dict[str, Any] = field(default_factory=dict)
    info: dict[str, CompileInfo] = field(default_factory=dict)
    error: str = ""
    fallback: str = ""  # with compiler "auto": why NVRTC could not compile it (nvcc did)


class CupyBackend(Backend):
    """Compiles each configuration with NVRTC through CuPy (or nvcc), checks and times it on the GPU.

    Options: `compiler` ("auto": NVRTC, and nvcc for a unit NVRTC cannot compile; "nvrtc"; "nvcc"),
    `device` (CUDA ordinal), `compile_workers` (threads that compile prefetched configurations while the
    GPU measures others), `checks` (False drops guards, ragged sizes, reference validation and the
    race re-run: only to measure what they cost), `verify_repeats` (checked runs per fresh seed).
    """

    name = "cupy"
    needs_isolation = True

    def __init__(
        self,
        *,
        compiler: str = "auto",
        device: int = 0,
        compile_workers: int = 4,
        checks: bool = True,
        verify_repeats: int = 2,
    ) -> None:
        if compiler not in COMPILERS:
            raise CutuneError(f"unknown compiler {compiler!r}; choose one of {', '.join(COMPILERS)}")
        self.compiler = compiler
        self.device = device
        self.compile_workers = compile_workers
        self.checks = checks
        self.verify_repeats = verify_repeats
        self.nvrtc_failed = ""  # with "auto": why NVRTC could not compile this job (nvcc is used from then on)
        self._healthy = True
        self._cp: ModuleType | None = None
        self._job: Job | None = None
        self._limits: DeviceLimits | None = None
        self._timer: Timer | None = None
        self._model: SourceModel | None = None
        self._kernel: Kernel | None = None
        self._qualified = ""
        self._pool: ThreadPoolExecutor | None = None
        self._modules: dict[_CompileKey, Future[_Module]] = {}
        self._problems: list[Problem] = []
        self._fresh: tuple[int, list[Problem]] | None = None  # verify's problems, for one seed
        # graph timing's input copies, per problem size
        self._rotations: dict[tuple[tuple[str, int], ...], list[list[Any]]] = {}

    @property
    def healthy(self) -> bool:
        return self._healthy

    def open(self, job: Job) -> DeviceInfo:
        """Start CUDA, measure (or read) the speed of light, compile the original and build the reference."""
        self._start(job)
        assert self._limits is not None
        self._timer = Timer(self._limits.l2_bytes)
        info = device_info(self._timer, self.device, graph=job.timing.mode == "graph")
        self._rotations = {}
        self._problems = self._reference(job.seed)
        return info

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
        self._model = parse_source(job.template.source, job.source_path)
        self._kernel = self._model.kernel(job.template.kernel)  # raises SourceError when absent
        self._qualified = qualified_name(self._model, job.template.kernel)
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
        if self.checks:
            problems += [
                make_problem(job.spec, r.size, rng, cp, guard_bytes=guard, timed=False) for r in ragged_sizes(job.spec)
            ]
        original = job.space.default()
        try:
            launches, _ = self._prepare(original, problems)
            for problem, launch in zip(problems, launches, strict=True):
                self._run_checked(problem, launch)
                problem.keep_reference()
                if self.checks:
                    self._run_checked(problem, launch, POISON_2)
                    second = problem.snapshot()
                    rerun = partial(self._run_poisoned, problem, launch)
                    self._guard(partial(problem.validate_reference, job.spec, second, cp, rerun))
        except _Failed as e:
            raise CutuneError(
                f"the original configuration ({original}) cannot serve as the reference: {e.failure.value}: {e.detail}"
            ) from None
        return problems

    def prefetch(self, configs: Sequence[Config]) -> None:
        """Start compiling these configurations in the background."""
        for config in configs:
            try:
                self._compiled(self._compile_key(config)[0])
            except _Failed:
                continue  # evaluate() reports it

    def evaluate(self, config: Config) -> Measurement:
        """Compile (or take the prefetched module), check every size against the reference, then time."""
        job = self._require_job()
        compiled: CompileInfo | None = None
        try:
            launches, compiled = self._prepare(config, self._problems)
            max_error = self._check(launches, self._problems)
            timings = tuple(
                self._time(problem, launch)
                for problem, launch in zip(self._problems, launches, strict=True)
                if problem.timed
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

        return sanitize_job(self._require_job(), configs, compiler=self.compiler, device=self.device)

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

    def _compile_key(self, config: Config, problems: Sequence[Problem] | None = None) -> tuple[_CompileKey, list[str]]:
        """The compile key of a configuration and the name expression each problem launches."""
        job = self._require_job()
        assert self._kernel is not None
        try:
            per_size = [
                instantiation(self._kernel, self._qualified, job.spec, job.space, config, p.size)
                for p in (self._problems if problems is None else problems)
            ]
            flags, defines = compile_options(job.space, config, job.spec)
        except CutuneError as e:
            raise _Failed(Failure.INFEASIBLE, str(e)) from None
        key = _CompileKey(tuple(dict.fromkeys(per_size)), tuple(flags), tuple(sorted(defines.items())))
        return key, per_size

    def _compiled(self, key: _CompileKey) -> Future[_Module]:
        if key not in self._modules:
            assert self._pool is not None
            self._modules[key] = self._pool.submit(self._compile, key)
        return self._modules[key]

    def _compile(self, key: _CompileKey) -> _Module:
        """Compile one key (in a worker thread); compiler errors become the module's `error`."""
        cp = self._cp
        assert cp is not None
        if self.compiler == "nvcc" or (self.compiler == "auto" and self.nvrtc_failed):
            return self._compile_with(self._compile_nvcc, key)
        module = self._compile_with(self._compile_nvrtc, key)
        if module.error and self.compiler == "auto":
            fallback = self._compile_with(self._compile_nvcc, key)
            if fallback.error:
                return module  # nvcc rejects it too: the configuration is at fault, NVRTC's message says why
            fallback.fallback = self.nvrtc_failed = f"NVRTC could not compile the unit, nvcc did: {module.error}"
            return fallback
        return module

    def _compile_with(self, compile_key: Callable[[_CompileKey], _Module], key: _CompileKey) -> _Module:
        """Compile with one compiler; its errors become the module's `error`."""
        cp = self._cp
        assert cp is not None
        try:
            return compile_key(key)
        except cp.cuda.compiler.CompileException as e:
            return _Module(error=_excerpt(e.get_message()))
        except Exception as e:  # extraction, loading, a missing entry: all fail this configuration's compile
            return _Module(error=f"{type(e).__name__}: {e}")

    def _options(self, key: _CompileKey, unit: CompileUnit, defaults: Sequence[str]) -> tuple[str, ...]:
        """Our defaults (unless the user picks a standard), the toolkit's headers, the unit's -I/-D, flags."""
        cp = self._cp
        assert cp is not None
        user = key.flags  # the spec's flags first, then the configuration's (from compile_options)
        has_std = any(f.startswith(("-std", "--std")) for f in user)
        cuda = cp.cuda.get_cuda_path()
        return (
            *(f for f in defaults if not (has_std and f.startswith("-std"))),
            *((f"-I{Path(cuda) / 'include'}",) if cuda else ()),
            *unit.options(),
            *user,
        )

    def _unit(self, key: _CompileKey, expressions: Sequence[str], *, for_nvrtc: bool) -> CompileUnit:
        job = self._require_job()
        assert self._model is not None
        dirs = tuple(str(Path(d).resolve()) for d in job.spec.include_dirs)
        return extract_kernel(
            self._model,
            job.template.kernel,
            instantiations=tuple(expressions),
            include_dirs=dirs,
            defines=dict(key.defines),
            for_nvrtc=for_nvrtc,
            drop_includes=job.spec.includes.drop,
            substitute_includes=job.spec.includes.substitute,
        )

    def _compile_nvrtc(self, key: _CompileKey) -> _Module:
        cp = self._cp
        assert cp is not None
        start = time.perf_counter()
        unit = self._unit(key, key.expressions, for_nvrtc=True)
        module = cp.RawModule(
            code=unit.source,
            options=self._options(key, unit, ("-std=c++17",)),
            name_expressions=list(unit.name_expressions),
        )
        functions = {e: module.get_function(n) for e, n in zip(key.expressions, unit.name_expressions, strict=True)}
        seconds = time.perf_counter() - start
        return _Module(functions, {e: _compile_info(f, seconds, compiler="nvrtc") for e, f in functions.items()})

    def _compile_nvcc(self, key: _CompileKey) -> _Module:
        # CuPy's nvcc path cannot resolve name expressions: compile one instantiation per cubin and
        # take the only entry's mangled name from ptxas' report.
        cp = self._cp
        assert cp is not None and self._limits is not None
        arch = self._limits.arch.removeprefix("sm_")
        out = _Module()
        for expression in key.expressions:
            start = time.perf_counter()
            unit = self._unit(key, (expression,), for_nvrtc=False)
            log = io.StringIO()
            cubin = cp.cuda.compiler.compile_using_nvcc(
                unit.source,
                (*self._options(key, unit, NVCC_FLAGS), "-Xptxas", "-v"),
                arch=arch,
                log_stream=log,
            )
            entry = pick_entry(parse_ptxas(log.getvalue()), None)
            path = cache_dir() / "cubin" / f"{hashlib.sha256(cubin).hexdigest()}.cubin"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(cubin)
            function = cp.RawModule(path=str(path)).get_function(entry.function)
            seconds = time.perf_counter() - start
            out.functions[expression] = function
            out.info[expression] = _compile_info(
                function, seconds, spill_bytes=entry.spill_store_bytes, compiler="nvcc"
            )
        return out

    # -- running ---------------------------------------------------------------------------------

    def _prepare(self, config: Config, problems: Sequence[Problem]) -> tuple[list[_Launch], CompileInfo]:
        """Compiled launches for every problem, after the resource checks."""
        job = self._require_job()
        key, per_size = self._compile_key(config, problems)
        module = self._compiled(key).result()
        if module.error:
            raise _Failed(Failure.COMPILE, module.error)
        assert self._limits is not None
        limits = self._limits
        numeric = {k: v for k, v in config.items() if not isinstance(v, str)}
        launches = []
        for problem, expression in zip(problems, per_size, strict=True):
            function = module.functions[expression]
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
            launches.append(_launcher(function, grid, block, smem, problem.args))
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
        samples = self._guard(lambda: timer.time(launch, job.timing, before))
        median, p10, p90 = summarize(samples)
        return Timing(size=dict(problem.size), median_us=median, p10_us=p10, p90_us=p90, reps=len(samples))

    def _rotation(self, problem: Problem) -> list[list[Any]]:
        """The argument lists graph timing rotates through at this problem's size (built once per size)."""
        cp = self._cp
        assert cp is not None and self._limits is not None
        key = tuple(sorted(problem.size.items()))
        if key not in self._rotations:
            launch_bytes = sum(a.nbytes for a in problem.arrays.values())
            copies = rotation_count(launch_bytes, self._limits.l2_bytes)
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

    def __call__(self) -> None:
        self.function(self.grid, self.block, self.args, shared_mem=self.smem)

    def on(self, args: Sequence[Any]) -> _Launch:
        """The same launch on other arguments."""
        return dataclasses.replace(self, args=tuple(args))


def _launcher(
    function: Any, grid: tuple[int, int, int], block: tuple[int, int, int], smem: int, args: Sequence[Any]
) -> _Launch:
    return _Launch(function, grid, block, smem, tuple(args))


def _compile_info(function: Any, seconds: float, *, spill_bytes: int = 0, compiler: str = "") -> CompileInfo:
    return CompileInfo(
        compiler=compiler,
        registers=function.num_regs,
        spill_bytes=spill_bytes,
        shared_bytes=function.shared_size_bytes,
        local_bytes=function.local_size_bytes,
        max_threads_per_block=function.max_threads_per_block,
        compile_seconds=seconds,
    )


def _import_cupy() -> ModuleType:
    if device_count() == 0:
        raise NoGpuError("CuPy sees no CUDA device")
    import cupy

    return cupy
