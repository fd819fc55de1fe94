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
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from cutune.gpu.backend import Check, Failure, Job
from cutune.template.dtypes import dtype_size
from cutune.template.model import Config
from cutune.template.spec import KernelSpec
from cutune.template.spec.ragged import ragged_sizes

TOOLS = ("memcheck", "racecheck")
_FOUND = 86  # the exit code asked of the tool when it reports an error
_TOOL_FAILURE = {"memcheck": Failure.OUT_OF_BOUNDS, "racecheck": Failure.RACE}


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
    config: Config,
    *,
    compiler: str = "auto",
    device: int = 0,
    tools: Sequence[str] = TOOLS,
    timeout_s: float = 300.0,
) -> Check | None:
    """Run `config` once under each tool; a reported error fails the check with the tool's message.

    None where compute-sanitizer is absent. A tool that cannot run at all (no finding) passes, saying so.
    """
    exe = sanitizer_path()
    if exe is None:
        return None
    size = sanitize_size(job.spec)
    where = ", ".join(f"{k}={v}" for k, v in size.items())
    with tempfile.TemporaryDirectory(prefix="cutune-sanitize-") as tmp:
        payload = Path(tmp) / "job.pickle"
        payload.write_bytes(pickle.dumps((job, config, size, compiler, device)))
        for tool in tools:
            command = [exe, "--tool", tool, "--error-exitcode", str(_FOUND), "--print-limit", "20"]
            command += [sys.executable, "-m", "cutune.gpu.sanitize", str(payload)]
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
            except subprocess.TimeoutExpired:
                return Check(config, detail=f"not sanitized: compute-sanitizer {tool} ran past {timeout_s:g} s")
            if done.returncode == _FOUND:
                message = findings(done.stdout + done.stderr)
                return Check(config, _TOOL_FAILURE[tool], f"compute-sanitizer {tool} at {where}: {message}")
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                return Check(config, detail=f"not sanitized: the {tool} run failed: {' | '.join(tail)}")
    return Check(config, detail=f"compute-sanitizer {', '.join(tools)}: no error at {where}")


def findings(output: str, limit: int = 6) -> str:
    """The tool's report lines (without its `=========` prefix), the first few joined."""
    lines = []
    for line in output.splitlines():
        if not line.startswith("========="):
            continue
        text = line.removeprefix("=========").strip()
        if text and not text.startswith(("COMPUTE-SANITIZER", "Saved host backtrace", "Host Frame")):
            lines.append(text)
    return " | ".join(lines[:limit]) or "an error (no report lines)"


def main(argv: Sequence[str]) -> int:
    """The child under the tool: run the configuration once on pool-free, guard-free arrays."""
    import cupy

    from cutune.gpu.cupy_backend import CupyBackend

    cupy.cuda.set_allocator(None)  # every array its own cudaMalloc of its exact size
    job, config, size, compiler, device = pickle.loads(Path(argv[0]).read_bytes())
    backend = CupyBackend(compiler=compiler, device=device, compile_workers=1)
    try:
        backend.run_once(job, config, size)
    finally:
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
