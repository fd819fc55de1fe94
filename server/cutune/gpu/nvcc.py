"""Compile-only resource checks with nvcc (or NVRTC): one kernel's registers, spills and shared memory, cached."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path

from cutune.errors import CompileError, CutuneError
from cutune.gpu import nvrtc
from cutune.gpu.compile_cache import CachedCompile, CompileCache
from cutune.gpu.resources import ResourceUsage, parse_ptxas, pick_entry

DEFAULT_FLAGS = ("-std=c++17", "--expt-relaxed-constexpr")
NVRTC_FLAGS = ("-std=c++17",)  # what tune's CuPy backend passes NVRTC
COMPILERS = ("auto", "nvrtc", "nvcc")
UNIT_NAME = "unit.cu"  # the compile unit's file name, as compiler messages show it
_LOG_LINES = 40
_LOWERED = "\n// cutune: lowered names\n"  # after NVRTC's log in a cached output: name expression=mangled
_WARNING = re.compile(r"(?:^|[\s:)])warning\b(?: #[\w-]+)?\s*:")


@dataclass(frozen=True, slots=True)
class CompileJob:
    """One compile unit and how to compile it; `kernel` names the entry to report.

    With `compiler` "nvrtc", `name_expressions` are instantiated by NVRTC and `kernel`, when it is one of
    them, is reported by its lowered (mangled) name.
    """

    source: str
    arch: str = "sm_90"
    flags: tuple[str, ...] = ()  # after the defaults, so they can override them
    include_dirs: tuple[str, ...] = ()
    defines: tuple[tuple[str, str], ...] = ()
    kernel: str | None = None
    compiler: str = "nvcc"  # "nvcc" or "nvrtc"
    name_expressions: tuple[str, ...] = ()


def have_nvcc() -> bool:
    """Whether nvcc is on PATH."""
    return shutil.which("nvcc") is not None


def nvcc_version() -> str | None:
    """nvcc's version, e.g. '13.0.88', or None without nvcc."""
    nvcc = shutil.which("nvcc")
    text = _version_text(nvcc) if nvcc else ""
    m = re.search(r"\bV(\d+(?:\.\d+)+)", text)
    return m.group(1) if m else None


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
    )
    return _compile(job, timeout, CompileCache(cache_dir) if cache_dir else None)


def compile_many(
    jobs: Sequence[CompileJob],
    *,
    workers: int | None = None,
    timeout: float = 120,
    cache_dir: Path | None = None,
    on_done: Callable[[int, ResourceUsage | CutuneError], None] | None = None,
) -> list[ResourceUsage | CutuneError]:
    """Compile jobs in parallel; results in job order, failures returned as errors, not raised.

    `on_done(index, result)` is called from the calling thread as each job finishes.
    """
    cache = CompileCache(cache_dir) if cache_dir else None
    results: dict[int, ResourceUsage | CutuneError] = {}
    # Threads suffice: the work happens in nvcc subprocesses, outside the GIL.
    pool = ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1)
    try:
        futures = {pool.submit(_compile, job, timeout, cache): i for i, job in enumerate(jobs)}
        pending = set(futures)
        while pending:
            # a short wait, again and again: a Ctrl-C that lands on a compiling thread reaches this one only when
            # it wakes
            finished, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=futures.__getitem__):
                index = futures[future]
                try:
                    result: ResourceUsage | CutuneError = future.result()
                except CutuneError as error:
                    result = error
                results[index] = result
                if on_done:
                    on_done(index, result)
    except BaseException:  # Ctrl-C: stop now, not after every queued compile; finished ones are in the cache
        pool.shutdown(wait=False, cancel_futures=True)
        _stop_compilers()
        raise
    pool.shutdown()
    return [results[i] for i in range(len(jobs))]


_RUNNING: set[subprocess.Popen[str]] = set()  # the nvcc processes running now, to stop on Ctrl-C
_RUNNING_LOCK = threading.Lock()


def _stop_compilers() -> None:
    """Kill every running nvcc with its children (they run in sessions of their own, so no Ctrl-C reaches them)."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def _compile(job: CompileJob, timeout: float, cache: CompileCache | None) -> ResourceUsage:
    if job.compiler == "nvrtc":
        return _compile_nvrtc(job, cache)
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise CompileError("nvcc is not on PATH; compile-only checks need the CUDA toolkit")
    args = _arguments(job)
    key = hashlib.sha256(json.dumps([job.source, args, _version_text(nvcc)]).encode()).hexdigest()
    hit = cache.get(key) if cache else None
    if hit is None:
        output, seconds = _run(nvcc, args, job, timeout)
        if cache:
            cache.put(key, CachedCompile(output, seconds))
    else:
        output, seconds = hit.output, hit.seconds
    entries = parse_ptxas(output)
    entry = pick_entry(entries, job.kernel, _demangle([e.function for e in entries]))
    return replace(entry, compile_seconds=seconds, cached=hit is not None, log=output)


def _compile_nvrtc(job: CompileJob, cache: CompileCache | None) -> ResourceUsage:
    """NVRTC to a cubin with ptxas' report; NVRTC runs in this process, so no timeout applies."""
    options = _nvrtc_options(job)
    key = hashlib.sha256(
        json.dumps(["nvrtc", job.source, options, job.name_expressions, nvrtc.nvrtc_version()]).encode()
    ).hexdigest()
    hit = cache.get(key) if cache else None
    if hit is None:
        start = time.perf_counter()
        out = nvrtc.compile_program(job.source, options, job.name_expressions)
        # the lowered names ride along in the cached output, after ptxas' report
        output = out.log + _LOWERED + "".join(f"{e}={n}\n" for e, n in out.lowered.items())
        seconds = time.perf_counter() - start
        if cache:
            cache.put(key, CachedCompile(output, seconds))
    else:
        output, seconds = hit.output, hit.seconds
    log, _, names = output.partition(_LOWERED)
    lowered = dict(line.split("=", 1) for line in names.splitlines() if "=" in line)
    entries = parse_ptxas(log)
    entry = pick_entry(entries, lowered.get(job.kernel or "", job.kernel), _demangle([e.function for e in entries]))
    return replace(entry, compile_seconds=seconds, cached=hit is not None, log=log)


def _nvrtc_options(job: CompileJob) -> list[str]:
    """NVRTC's options: tune's defaults, the toolkit's headers, -I/-D, flags, and ptxas' report."""
    user_std = any(f.startswith(("-std", "--std")) for f in job.flags)
    return [
        f"-arch={job.arch}",
        *(f for f in NVRTC_FLAGS if not (user_std and f.startswith("-std"))),
        *(f"-I{d}" for d in nvrtc.cuda_include_dirs()),
        *(f"-I{Path(d).resolve()}" for d in job.include_dirs),
        *(f"-D{name}={value}" for name, value in job.defines),
        *job.flags,
        "-Xptxas=-v",
    ]


def _arguments(job: CompileJob) -> list[str]:
    """nvcc's arguments before the input file; also what the cache key covers."""
    user_std = any(f.startswith(("-std", "--std")) for f in job.flags)
    defaults = [f for f in DEFAULT_FLAGS if not (user_std and f.startswith("-std"))]
    return [
        f"-arch={job.arch}",
        "-cubin",
        "-Xptxas",
        "-v",
        *defaults,
        # Absolute, because nvcc runs in a temporary directory.
        *(f"-I{Path(d).resolve()}" for d in job.include_dirs),
        *(f"-D{name}={value}" for name, value in job.defines),
        *job.flags,
    ]


def _run(nvcc: str, args: list[str], job: CompileJob, timeout: float) -> tuple[str, float]:
    with tempfile.TemporaryDirectory(prefix="cutune-nvcc-") as tmp:
        Path(tmp, UNIT_NAME).write_text(job.source, encoding="utf-8")
        start = time.perf_counter()
        # A session of its own, so a timeout can kill nvcc's children (cicc, ptxas) too.
        proc = subprocess.Popen(
            [nvcc, *args, UNIT_NAME, "-o", "unit.cubin"],
            cwd=tmp,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        with _RUNNING_LOCK:
            _RUNNING.add(proc)
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise CompileError(f"nvcc -arch={job.arch} timed out after {timeout:g} s on {UNIT_NAME}") from None
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(proc)
        seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise CompileError(
            f"nvcc -arch={job.arch} could not compile {UNIT_NAME} (exit {proc.returncode}):",
            log=_excerpt(output),
        )
    return output, seconds


def _excerpt(output: str) -> str:
    """The compiler's errors without its warnings and blank lines, cut to the first lines."""
    kept: list[str] = []
    in_warning = False
    for line in output.splitlines():
        if not line.strip() or line.startswith("Remark:"):
            continue
        if not line[0].isspace():  # indented lines continue the diagnostic above them
            in_warning = bool(_WARNING.search(line))
        if not in_warning:
            kept.append(line)
    kept = kept or output.strip().splitlines()
    more = len(kept) - _LOG_LINES
    return "\n".join(kept[:_LOG_LINES] + ([f"... ({more} more lines)"] if more > 0 else []))


def _demangle(names: Sequence[str]) -> dict[str, str]:
    """Demangled names by mangled name, through cu++filt (or c++filt); empty when neither works."""
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    mangled = [n for n in names if n.startswith("_Z")]
    if tool is None or not mangled:
        return {}
    try:
        done = subprocess.run(
            [tool], input="\n".join(mangled) + "\n", capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    lines = done.stdout.splitlines()
    return dict(zip(mangled, lines, strict=True)) if len(lines) == len(mangled) else {}


@functools.cache
def _version_text(nvcc: str) -> str:
    try:
        return subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
