"""The one compiler rule and batch compiles: `auto` is NVRTC, else nvcc with NVRTC's reason.

Everything that compiles a kernel goes through `compile_kernel`: `check`, the tune backend (and through it
the sanitizer and the profiler), the agent's and the language server's checks. The rule applies to each
compile request on its own, so a configuration compiles with the same compiler wherever it is compiled.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from cutune.cuda.extract import CompileUnit
from cutune.errors import CutuneError
from cutune.gpu.compile_cache import CompileCache
from cutune.gpu.compiler import Compiled, Compiler, KernelRequest, Target
from cutune.gpu.nvcc import NvccCompiler, stop_compilers
from cutune.gpu.nvrtc import NvrtcCompiler
from cutune.gpu.resources import ResourceUsage

COMPILERS = ("auto", "nvrtc", "nvcc")
_IMPLEMENTATIONS: dict[str, Compiler] = {"nvrtc": NvrtcCompiler(), "nvcc": NvccCompiler()}
T = TypeVar("T")
# a compiler's `path(line): ` before its message (nvcc and NVRTC both write it so)
_LOCATION = re.compile(r"^(\S[^()]*)\((\d+)\): ")


def check_choice(choice: str) -> str:
    """`choice` when it names a compiler or `auto`; raises CutuneError otherwise."""
    if choice not in COMPILERS:
        raise CutuneError(f"unknown compiler {choice!r}; choose one of {', '.join(COMPILERS)}")
    return choice


def compile_kernel(
    request: KernelRequest, target: Target, choice: str = "auto", cache: CompileCache | None = None
) -> Compiled:
    """Compile every instantiation of `request` with `choice` (auto: NVRTC, else nvcc, saying why).

    Raises CutuneError (CompileError, SourceError) when it does not compile; with `auto`, where neither
    compiler can, nvcc's complaint (the compiler of a real build) is raised."""
    if check_choice(choice) != "auto":
        return _compile_with(_IMPLEMENTATIONS[choice], request, target, cache)
    try:
        return _compile_with(_IMPLEMENTATIONS["nvrtc"], request, target, cache)
    except CutuneError as nvrtc_error:
        compiled = _compile_with(_IMPLEMENTATIONS["nvcc"], request, target, cache)
        return replace(compiled, fallback=f"NVRTC could not compile the unit, nvcc did: {first_error(nvrtc_error)}")


def _compile_with(compiler: Compiler, request: KernelRequest, target: Target, cache: CompileCache | None) -> Compiled:
    kernels = [k for unit in compiler.units(request) for k in compiler.compile(unit, target, cache)]
    return Compiled(compiler.name, tuple(kernels))


def first_error(error: BaseException | str) -> str:
    """The first line of a compiler's complaint that says `error` (else its first line), cut short."""
    text = str(error)
    line = ([ln for ln in text.splitlines() if "error" in ln] or text.splitlines() or [""])[0]
    # the cut falls in the message, never in its `file(line): ` location, however deep the file lies
    located = _LOCATION.match(line)
    where = f"{os.path.normpath(located[1])}({located[2]}): " if located else ""
    hint = getattr(error, "hint", "")
    return where + line[located.end() if located else 0 :][:160] + (f" ({hint})" if hint else "")


def run_parallel(
    tasks: Sequence[Callable[[], T]],
    *,
    workers: int | None = None,
    on_done: Callable[[int, T | CutuneError], None] | None = None,
) -> list[T | CutuneError]:
    """Run compile tasks on threads (the work happens in nvcc subprocesses or NVRTC calls, outside the GIL);
    results in task order, failures returned as errors, not raised. `on_done(index, result)` runs in the
    calling thread as each finishes."""
    results: dict[int, T | CutuneError] = {}
    pool = ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1)
    try:
        futures = {pool.submit(task): i for i, task in enumerate(tasks)}
        pending = set(futures)
        while pending:
            # a short wait, again and again: a Ctrl-C that lands on a compiling thread reaches this one only when
            # it wakes
            finished, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=futures.__getitem__):
                index = futures[future]
                try:
                    result: T | CutuneError = future.result()
                except CutuneError as error:
                    result = error
                results[index] = result
                if on_done:
                    on_done(index, result)
    except BaseException:  # Ctrl-C: stop now, not after every queued compile; finished ones are in the cache
        pool.shutdown(wait=False, cancel_futures=True)
        stop_compilers()
        raise
    pool.shutdown()
    return [results[i] for i in range(len(tasks))]


@dataclass(frozen=True, slots=True)
class CompileJob:
    """One source and how to compile it, for a resource report; `kernel` names the entry to report.

    With `compiler` "nvrtc", `name_expressions` are instantiated by NVRTC and `kernel`, when it is one of
    them, is found by its lowered (mangled) name.
    """

    source: str
    arch: str = "sm_90"
    flags: tuple[str, ...] = ()  # after the defaults, so they can override them
    include_dirs: tuple[str, ...] = ()
    defines: tuple[tuple[str, str], ...] = ()
    kernel: str | None = None
    compiler: str = "nvcc"  # "nvcc" or "nvrtc"
    name_expressions: tuple[str, ...] = ()
    timeout: float = 120.0

    def resources(self, cache: CompileCache | None = None) -> ResourceUsage:
        """Compile and report what `kernel` uses."""
        nvrtc = self.compiler == "nvrtc"
        unit = CompileUnit(
            self.source,
            self.kernel or "",
            self.name_expressions if nvrtc else (),
            include_dirs=self.include_dirs,
            defines=self.defines,
            for_nvrtc=nvrtc,
        )
        compiled = _IMPLEMENTATIONS[check_choice(self.compiler)].compile(
            unit, Target(self.arch, self.flags, self.timeout), cache
        )
        by_name = {k.name: k for k in compiled}
        return (by_name.get(self.kernel or "") or compiled[0]).resources


def compile_resources(
    source: str,
    *,
    arch: str = "sm_90",
    flags: Sequence[str] = (),
    include_dirs: Sequence[str | os.PathLike[str]] = (),
    defines: Mapping[str, str] | None = None,
    kernel: str | None = None,
    timeout: float = 120,
    cache_dir: Path | None = None,
) -> ResourceUsage:
    """Compile `source` to a cubin with `nvcc -Xptxas -v` and report what `kernel` uses.

    Raises CompileError when nvcc is missing, fails or times out, and SourceError when no entry
    (or more than one) matches `kernel`.
    """
    job = CompileJob(
        source,
        arch,
        tuple(flags),
        tuple(os.fspath(d) for d in include_dirs),
        tuple((defines or {}).items()),
        kernel,
        timeout=timeout,
    )
    return job.resources(CompileCache(cache_dir) if cache_dir else None)


def compile_many(
    jobs: Sequence[CompileJob],
    *,
    workers: int | None = None,
    cache_dir: Path | None = None,
    on_done: Callable[[int, ResourceUsage | CutuneError], None] | None = None,
) -> list[ResourceUsage | CutuneError]:
    """Compile jobs in parallel; results in job order, failures returned as errors, not raised."""
    cache = CompileCache(cache_dir) if cache_dir else None
    tasks = [functools.partial(job.resources, cache) for job in jobs]
    return run_parallel(tasks, workers=workers, on_done=on_done)
