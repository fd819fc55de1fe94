"""nvcc behind the compiler interface: a subprocess per unit, to a cubin with ptxas' report."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

from cutune.cuda.extract import CompileUnit
from cutune.errors import CompileError
from cutune.gpu.compiler import STD_FLAG, Compiler, CompilerOutput, KernelRequest, Target, user_std

NVCC_FLAGS = ("--expt-relaxed-constexpr",)  # nvcc's defaults besides the language standard
UNIT_NAME = "unit.cu"  # the compile unit's file name, as compiler messages show it
_LOG_LINES = 40
_WARNING = re.compile(r"(?:^|[\s:)])warning\b(?: #[\w-]+)?\s*:")


class NvccCompiler(Compiler):
    """nvcc -cubin -Xptxas -v; one unit per instantiation, since only NVRTC resolves name expressions
    (the wanted entry is then the one kernel of that name, whatever else the unit's headers bring)."""

    name = "nvcc"
    for_nvrtc = False

    def options(self, unit: CompileUnit, target: Target) -> tuple[str, ...]:
        """-arch, cubin with ptxas' report, the defaults, the unit's -I/-D/-U, then the flags."""
        std = () if user_std(target.flags) else (STD_FLAG,)
        return (f"-arch={target.arch}", "-cubin", "-Xptxas", "-v", *std, *NVCC_FLAGS, *unit.options(), *target.flags)

    def version(self) -> str:
        nvcc = shutil.which("nvcc")
        if nvcc is None:
            raise CompileError("nvcc is not on PATH; compile-only checks need the CUDA toolkit")
        return _version_text(nvcc)

    def units(self, request: KernelRequest) -> list[CompileUnit]:
        if not request.expressions:
            return [request.make_unit((), False)]
        return [request.make_unit((e,), False) for e in dict.fromkeys(request.expressions)]

    def _run(self, unit: CompileUnit, options: tuple[str, ...], target: Target) -> CompilerOutput:
        nvcc = shutil.which("nvcc")
        if nvcc is None:
            raise CompileError("nvcc is not on PATH; compile-only checks need the CUDA toolkit")
        with tempfile.TemporaryDirectory(prefix="cutune-nvcc-") as tmp:
            Path(tmp, UNIT_NAME).write_text(unit.source, encoding="utf-8")
            # A session of its own, so a timeout can kill nvcc's children (cicc, ptxas) too.
            proc = subprocess.Popen(
                [nvcc, *options, UNIT_NAME, "-o", "unit.cubin"],
                cwd=tmp,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            with _RUNNING_LOCK:
                _RUNNING.add(proc)
            try:
                output, _ = proc.communicate(timeout=target.timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                raise CompileError(
                    f"nvcc -arch={target.arch} timed out after {target.timeout:g} s on {UNIT_NAME}"
                ) from None
            finally:
                with _RUNNING_LOCK:
                    _RUNNING.discard(proc)
            if proc.returncode != 0:
                raise CompileError(
                    f"nvcc -arch={target.arch} could not compile {UNIT_NAME} (exit {proc.returncode}):",
                    log=excerpt(output),
                )
            binary = Path(tmp, "unit.cubin").read_bytes()
        return CompilerOutput(output, binary, {})


_RUNNING: set[subprocess.Popen[str]] = set()  # the nvcc processes running now, to stop on Ctrl-C
_RUNNING_LOCK = threading.Lock()


def stop_compilers() -> None:
    """Kill every running nvcc with its children (they run in sessions of their own, so no Ctrl-C reaches them)."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def have_nvcc() -> bool:
    """Whether nvcc is on PATH."""
    return shutil.which("nvcc") is not None


def nvcc_version() -> str | None:
    """nvcc's version, e.g. '13.0.88', or None without nvcc."""
    nvcc = shutil.which("nvcc")
    text = _version_text(nvcc) if nvcc else ""
    m = re.search(r"\bV(\d+(?:\.\d+)+)", text)
    return m.group(1) if m else None


def excerpt(output: str) -> str:
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


@functools.cache
def _version_text(nvcc: str) -> str:
    try:
        return subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
