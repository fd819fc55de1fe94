"""compute-sanitizer on a winner: memcheck and racecheck on one run at one size, in a fresh process.

The job, configuration and size are pickled to a file; `python -m cutune.gpu.sanitize FILE` runs under
the tool, with CuPy's memory pool off (`cupy.cuda.set_allocator(None)`) and no guard regions, so every
array is its own allocation of exactly its size and memcheck sees even an overrun of a few bytes (the
pool hands out sub-blocks of larger allocations, which hide them). The size is the smallest ragged
size (tails are where overruns live), else the smallest spec size.
"""

from __future__ import annotations

import math
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cutune.errors import CutuneError
from cutune.gpu.backend import Capability, Check, Failure, Job
from cutune.spec import KernelSpec
from cutune.spec.ragged import ragged_sizes
from cutune.template.dtypes import dtype_size
from cutune.template.model import Config

TOOLS = ("memcheck", "racecheck")
_FOUND = 86  # the exit code asked of the tool when it reports an error
PROCESSES_PER_TOOL = 3  # children each tool runs at once, each with a share of the configurations
_START, _DONE = "cutune-sanitize: start ", "cutune-sanitize: done "
_TOOL_FAILURE = {"memcheck": Failure.OUT_OF_BOUNDS, "racecheck": Failure.RACE}
_KERNEL_ERROR = re.compile(r"Invalid|Misaligned|Race|[Hh]azard|out of bounds|Barrier error|Uninitialized")
_NOISE = ("COMPUTE-SANITIZER", "Saved host backtrace", "Host Frame", "ERROR SUMMARY", "RACECHECK SUMMARY")


@runtime_checkable
class RunsEach(Protocol):
    """A backend that runs configurations once each, as the sanitizer's child does (Capability.SANITIZE)."""

    def run_each(
        self, job: Job, configs: Sequence[Config], size: dict[str, int], before: Callable[[int], None]
    ) -> Iterator[bool]: ...

    def close(self) -> None: ...


def sanitizer_path() -> str | None:
    """The compute-sanitizer executable, or None where it is not on PATH."""
    return shutil.which("compute-sanitizer")


def sanitize_size(spec: KernelSpec) -> dict[str, int]:
    """The size to sanitize at: the smallest ragged size, else the smallest spec size (by array bytes)."""
    candidates = [r.size for r in ragged_sizes(spec)] or list(spec.sizes)

    def nbytes(size: dict[str, int]) -> int:
        shapes = spec.array_shapes(size)
        return sum(math.prod(shapes[a.name]) * dtype_size(a.dtype) for a in spec.args if a.shape is not None)

    return min(candidates, key=nbytes)


def sanitize_job(
    job: Job,
    configs: Sequence[Config],
    *,
    backend: str,
    options: Mapping[str, Any],
    tools: Sequence[str] = TOOLS,
    timeout_s: float = 300.0,
) -> tuple[Check, ...] | None:
    """Run each configuration once under each tool (the tools at once, each in up to PROCESSES_PER_TOOL
    processes with a share of the configurations, another after a fault); a check per configuration.

    A reported error fails that configuration with the tool's message. None where compute-sanitizer is
    absent; a configuration the tool could not run (no finding) passes, saying it was not sanitized.
    The child builds `backend` (a registry name, which must declare Capability.SANITIZE) from `options`.
    """
    exe = sanitizer_path()
    if exe is None:
        return None
    size = sanitize_size(job.spec)
    where = ", ".join(f"{k}={v}" for k, v in size.items())

    # the tools at once, the configurations dealt to a few processes per tool: nothing here is timed, and a run
    # is mostly the child's start and its module loads under the tool, so the wall time is the slowest share's
    shares = [list(range(len(configs)))[k::PROCESSES_PER_TOOL] for k in range(min(len(configs), PROCESSES_PER_TOOL))]
    work = [(tool, share) for tool in tools for share in shares]

    def under(task: tuple[str, list[int]]) -> tuple[dict[int, Check], dict[int, str]]:
        return _under_tool(exe, task[0], task[1], job, configs, size, where, backend, options, timeout_s)

    with ThreadPoolExecutor(max(len(work), 1), thread_name_prefix="cutune-sanitize") as pool:
        reports = list(pool.map(under, work))
    failed: dict[int, Check] = {}
    missed: dict[int, str] = {}
    for found, not_run in reports:  # in the order of `tools`: a configuration fails with the first tool's finding
        for i, check in found.items():
            failed.setdefault(i, check)
        for i, why in not_run.items():
            missed.setdefault(i, why)
    return tuple(
        failed.get(i)
        or Check(config, detail=missed.get(i, f"compute-sanitizer {', '.join(tools)}: no error at {where}"))
        for i, config in enumerate(configs)
    )


def _under_tool(
    exe: str,
    tool: str,
    indices: list[int],
    job: Job,
    configs: Sequence[Config],
    size: dict[str, int],
    where: str,
    backend: str,
    options: Mapping[str, Any],
    timeout_s: float,
) -> tuple[dict[int, Check], dict[int, str]]:
    """The configurations at `indices` run once each under `tool` (another process after a fault): the
    findings, and the configurations it could not run with why."""
    failed: dict[int, Check] = {}
    missed: dict[int, str] = {}
    todo = list(indices)
    with tempfile.TemporaryDirectory(prefix=f"cutune-{tool}-") as tmp:
        while todo:  # a fault ends the process: the configurations after it run in a new one
            payload = Path(tmp) / "job.pickle"
            payload.write_bytes(pickle.dumps((job, tuple(configs[i] for i in todo), size, backend, dict(options))))
            output = _run_tool(exe, tool, payload, timeout_s)
            left = []
            for i, (report, started, finished) in zip(todo, _segments(output, len(todo)), strict=True):
                if found := findings(report):
                    failed[i] = Check(configs[i], _TOOL_FAILURE[tool], f"compute-sanitizer {tool} at {where}: {found}")
                elif started and not finished:
                    missed[i] = f"not sanitized: the {tool} run did not finish it"
                elif not started:
                    left.append(i)
            if len(left) == len(todo):  # nothing ran: the tool or the child cannot run at all
                why = " | ".join(output.strip().splitlines()[-3:])
                for i in left:
                    missed[i] = f"not sanitized: the {tool} run failed: {why}"
                break
            todo = left
    return failed, missed


def _run_tool(exe: str, tool: str, payload: Path, timeout_s: float) -> str:
    """The output of one child run under `tool` (what it printed before a timeout, if it ran past it)."""
    command = [exe, "--tool", tool, "--error-exitcode", str(_FOUND), "--print-limit", "20"]
    command += [sys.executable, "-m", "cutune.gpu.sanitize", str(payload)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as e:
        return e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
    return done.stdout if done.returncode in (0, _FOUND) else done.stdout + "\n" + done.stderr


def _segments(output: str, count: int) -> list[tuple[str, bool, bool]]:
    """Per configuration: the output printed while it ran, whether it started, and whether it finished."""
    parts: list[list[str]] = [[] for _ in range(count)]
    started, finished = [False] * count, [False] * count
    current = -1
    for line in output.splitlines():
        if line.startswith(_START):
            current = int(line.removeprefix(_START))
            started[current] = True
        elif line.startswith(_DONE):
            finished[int(line.removeprefix(_DONE))] = True
        elif 0 <= current < count:
            parts[current].append(line)
    return [("\n".join(p), s, f) for p, s, f in zip(parts, started, finished, strict=True)]


def findings(output: str, limit: int = 6) -> str:
    """The tool's reports on the kernel (not on host API calls), without its `=========` prefix, joined."""
    lines = [line.removeprefix("=========").strip() for line in output.splitlines() if line.startswith("=========")]
    if not any(_KERNEL_ERROR.search(line) and "CUDA API call" not in line for line in lines):
        return ""
    kept = [line for line in lines if line and not line.startswith(_NOISE) and "CUDA API call" not in line]
    return " | ".join(kept[:limit])


def main(argv: Sequence[str]) -> int:
    """The child under the tool: run each configuration once on pool-free, guard-free arrays, between
    markers that tell the parent which configuration a report belongs to."""
    import cupy

    from cutune.gpu.registry import resolve_backend

    cupy.cuda.set_allocator(None)  # every array its own cudaMalloc of its exact size
    job, configs, size, name, options = pickle.loads(Path(argv[0]).read_bytes())
    cls = resolve_backend(name)
    # under the tool every launch is serialised and instrumented: no speed of light is measured (nor cached) here
    backend = cls(**{**options, "speed_of_light": False})
    if Capability.SANITIZE not in cls.capabilities or not isinstance(backend, RunsEach):
        raise CutuneError(f"the {name} backend cannot run configurations under compute-sanitizer")
    try:
        for i, ran in enumerate(backend.run_each(job, configs, size, lambda i: print(f"{_START}{i}", flush=True))):
            if ran:
                print(f"{_DONE}{i}", flush=True)
    finally:
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
