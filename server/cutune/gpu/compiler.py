"""The compiler interface: a compile unit and a target in; a binary, each wanted kernel's mangled name and
resources, and the compiler's diagnostics out.

Two implementations sit behind it (`NvrtcCompiler` in `gpu/nvrtc.py`, `NvccCompiler` in `gpu/nvcc.py`);
`gpu/compile.py` holds the one rule that picks between them. Options are built here and only here, so
`check`, the tune backend and the tools that re-run a configuration compile the same unit the same way.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from cutune.cuda.extract import CompileUnit
from cutune.cuda.stand_ins import STOOD_IN
from cutune.errors import CompileError, CutuneError, SourceError
from cutune.gpu.compile_cache import CachedCompile, CompileCache
from cutune.gpu.resources import ResourceUsage, parse_ptxas, pick_entry

STD_FLAG = "-std=c++17"  # both compilers' default language standard, unless the flags choose one


@dataclass(frozen=True)
class Target:
    """What to compile for: the architecture and the flags (the spec's, then the configuration's)."""

    arch: str = "sm_90"
    flags: tuple[str, ...] = ()
    timeout: float = 120.0  # nvcc only: NVRTC runs in this process


@dataclass(frozen=True)
class Build:
    """How one kernel was compiled: the compiler, its full option list and the unit's source (hash)."""

    compiler: str
    options: tuple[str, ...]
    source_hash: str


@dataclass(frozen=True)
class CompiledKernel:
    """One wanted kernel in a compiled binary: loadable by `function`, its resources read for that function."""

    name: str  # what was asked for: a name expression, or the kernel's name
    function: str  # the mangled name to load (e.g. with CuPy's RawModule.get_function)
    binary: bytes  # the cubin that holds it
    resources: ResourceUsage
    build: Build


@dataclass(frozen=True)
class Compiled:
    """Every wanted kernel of one compile request, the compiler that produced them and, with `auto`,
    why NVRTC could not (empty when it could or was not asked)."""

    compiler: str
    kernels: tuple[CompiledKernel, ...]
    fallback: str = ""

    def kernel(self, name: str) -> CompiledKernel:
        """The compiled kernel asked for as `name`."""
        for k in self.kernels:
            if k.name == name:
                return k
        raise CutuneError(f"{name!r} was not compiled; compiled: {', '.join(k.name for k in self.kernels)}")


# Builds the unit for a compiler: (name expressions, for NVRTC) → unit.
UnitMaker = Callable[[tuple[str, ...], bool], CompileUnit]


@dataclass(frozen=True)
class KernelRequest:
    """What to compile: how to extract the unit (it differs between nvcc and NVRTC) and the instantiations."""

    make_unit: UnitMaker
    expressions: tuple[str, ...]


@dataclass(frozen=True)
class CompilerOutput:
    """What one compiler run leaves: ptxas' report, the binary and the lowered names (NVRTC only)."""

    log: str
    binary: bytes
    lowered: dict[str, str]


class Compiler(ABC):
    """Compiles units to cubins. Subclasses say how to run the compiler and which options it takes."""

    name: ClassVar[str]
    for_nvrtc: ClassVar[bool]  # whether units are extracted for NVRTC (no host C/C++ library)

    @abstractmethod
    def options(self, unit: CompileUnit, target: Target) -> tuple[str, ...]:
        """The full option list for `unit` (what the cache key covers)."""

    @abstractmethod
    def version(self) -> str:
        """The compiler's version text (part of the cache key); raises CompileError when it is missing."""

    @abstractmethod
    def _run(self, unit: CompileUnit, options: tuple[str, ...], target: Target) -> CompilerOutput:
        """Compile once; raises CompileError with the compiler's log."""

    @abstractmethod
    def units(self, request: KernelRequest) -> list[CompileUnit]:
        """The units that hold every instantiation of `request` (one, or one per instantiation)."""

    def compile(self, unit: CompileUnit, target: Target, cache: CompileCache | None = None) -> list[CompiledKernel]:
        """Compile `unit` for `target` (through `cache`); one entry per name expression, else for `unit.kernel`.

        Raises CompileError when the compiler fails, SourceError when a wanted kernel is not in the binary.
        """
        options = self.options(unit, target)
        names = tuple(unit.name_expressions)
        key = hashlib.sha256(json.dumps([self.name, unit.source, options, names, self.version()]).encode()).hexdigest()
        hit = cache.get(key) if cache else None
        if hit is not None and not (hit.extra or {}).get("binary"):
            hit = None  # an entry of an older cutune, without the binary
        if hit is None:
            start = time.perf_counter()
            try:
                out = self._run(unit, options, target)
            except CompileError as e:
                if not (hint := _hint(unit, str(e))):
                    raise
                raise CompileError(str(e), hint=hint) from None
            seconds = time.perf_counter() - start
            if cache:
                blob = base64.b64encode(out.binary).decode()
                cache.put(key, CachedCompile(out.log, seconds, {"binary": blob, "lowered": out.lowered}))
        else:
            extra = hit.extra or {}
            binary = base64.b64decode(str(extra.get("binary", "")))
            out = CompilerOutput(hit.output, binary, dict(extra.get("lowered", {})))
            seconds = hit.seconds
        entries = parse_ptxas(out.log)
        functions = {e.function for e in entries}
        lowered = bool(names) and all(out.lowered.get(n) in functions for n in names)
        demangled = {} if lowered else demangle(list(functions))  # NVRTC's lowered names need no demangling
        build = Build(self.name, options, hashlib.sha256(unit.source.encode()).hexdigest())
        found = []
        for wanted in names or (unit.kernel,):
            entry = _entry(entries, out.lowered.get(wanted) or wanted, unit.kernel, demangled, single=len(names) <= 1)
            resources = replace(entry, compile_seconds=seconds, cached=hit is not None, log=out.log)
            found.append(CompiledKernel(wanted, entry.function, out.binary, resources, build))
        return found


def _hint(unit: CompileUnit, error: str) -> str:
    """What extraction did that may explain a compile error: headers stood in for (torch's, the host API's, the
    standard library's), or instantiations that match no definition of the kernel (taking `&k<...>` then cannot
    deduce its type)."""
    hints = [n for n in unit.notes if STOOD_IN in n]
    if 'cannot deduce "auto" type' in error and "cutune_inst_" in error:
        shown = ", ".join(f"`{e}`" for e in unit.name_expressions)
        hints.append(f"{shown} matches no single definition of {unit.kernel}: check the template arguments' kinds")
    return "; ".join(hints)


def _entry(
    entries: Sequence[ResourceUsage], wanted: str, kernel: str, demangled: dict[str, str], *, single: bool
) -> ResourceUsage:
    """The entry for `wanted`; with one instantiation in the unit, the kernel's own name picks it where the
    expression's spelling differs from the demangled one (`128` vs `128u`), whatever else the unit holds."""
    if not wanted:
        return pick_entry(entries, None, demangled)
    try:
        return pick_entry(entries, wanted, demangled)
    except SourceError:
        if not single or not kernel or kernel == wanted:
            raise
        return pick_entry(entries, kernel, demangled)


def user_std(flags: Sequence[str]) -> bool:
    """Whether the flags choose a language standard (then the default one is left out)."""
    return any(f.startswith(("-std", "--std")) for f in flags)


def demangle(names: Sequence[str]) -> dict[str, str]:
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
