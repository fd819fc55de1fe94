"""What each compiled kernel uses, read from ptxas' verbose report, and picking the kernel asked for."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cutune.errors import SourceError


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    """Registers, spills, stack and shared/constant memory of one compiled entry function."""

    function: str  # the mangled name
    registers: int
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    stack_bytes: int = 0  # the cumulative stack (callees included) where ptxas reports one
    shared_bytes: int = 0  # static shared memory
    constant_bytes: int = 0  # per-function constant banks; CUDA 13 ptxas reports none for sm_90
    barriers: int = 0
    compile_seconds: float = 0.0  # wall time of the compile that produced it (kept on cache hits)
    cached: bool = False
    log: str = ""  # the compiler's output

    @property
    def spills(self) -> bool:
        """Whether ptxas spilled registers to local memory."""
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[\d+\]")
_CUMULATIVE_STACK = re.compile(r"(\d+) bytes cumulative stack size")


def parse_ptxas(text: str) -> list[ResourceUsage]:
    """The entry functions in a `ptxas -v` report, in report order (device functions are skipped)."""
    found: dict[str, dict[str, int]] = {}
    entry: str | None = None  # the entry whose "Used ..." line comes next
    described: str | None = None  # the function whose stack-frame line comes next
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            entry = m.group(1)
            found[entry] = {"registers": 0}
        if m := _PROPERTIES.search(line):
            described = m.group(1)
        if (m := _FRAME.search(line)) and described in found:
            fields = found[described]
            fields["stack_bytes"] = max(fields.get("stack_bytes", 0), int(m.group(1)))
            fields["spill_store_bytes"] = int(m.group(2))
            fields["spill_load_bytes"] = int(m.group(3))
        if (m := _USED.search(line)) and entry in found:
            fields = found[entry]
            fields["registers"] = int(m.group(1))
            fields["barriers"] = _int(_BARRIERS, line)
            fields["shared_bytes"] = _int(_SMEM, line)
            fields["constant_bytes"] = sum(int(c) for c in _CMEM.findall(line))
            fields["stack_bytes"] = max(fields.get("stack_bytes", 0), _int(_CUMULATIVE_STACK, line))
    return [ResourceUsage(function=name, **fields) for name, fields in found.items()]  # type: ignore[arg-type]


def pick_entry(
    entries: Sequence[ResourceUsage], kernel: str | None, demangled: Mapping[str, str] | None = None
) -> ResourceUsage:
    """The entry for `kernel` (a name, a name with template arguments, or a mangled name).

    Exact name matches win over substring matches; with `kernel` None the unit must hold one entry.
    `demangled` maps mangled names to demangled ones; without it only mangled names are searched.
    """
    demangled = demangled or {}
    shown = ", ".join(demangled.get(e.function, e.function) for e in entries) or "none"
    if kernel is None:
        if len(entries) == 1:
            return entries[0]
        raise SourceError(f"the compile unit has {len(entries)} kernels ({shown}); name the one to check")
    want = _squash(kernel)
    exact = [e for e in entries if want in _names(e.function, demangled.get(e.function))]
    matches = exact or [
        e for e in entries if want in _squash(e.function) or want in _squash(demangled.get(e.function, ""))
    ]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise SourceError(f"no kernel named {kernel!r} in the compile unit; its kernels: {shown}")
    names = ", ".join(demangled.get(e.function, e.function) for e in matches)
    raise SourceError(
        f"{kernel!r} matches {len(matches)} kernels ({names}); name one, e.g. with its template arguments"
    )


def _names(mangled: str, demangled: str | None) -> set[str]:
    """The spellings that name a kernel exactly: mangled, with template arguments, bare, unqualified."""
    names = {_squash(mangled)}
    if demangled:
        with_args = _without_return_type(_without_parameters(demangled))
        bare = with_args.split("<", 1)[0]
        names |= {_squash(demangled), _squash(with_args), bare, bare.rsplit("::", 1)[-1]}
    return names


def _without_parameters(signature: str) -> str:
    if not signature.endswith(")"):
        return signature
    depth = 0
    for i in range(len(signature) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(signature[i], 0)
        if depth == 0:
            return signature[:i]
    return signature


def _without_return_type(name: str) -> str:
    # Template instances demangle with their return type ("void k<float, 128>"): cut at the last
    # space outside template arguments.
    depth = 0
    cut = 0
    for i, ch in enumerate(name):
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(ch, 0)
        if ch == " " and depth == 0:
            cut = i + 1
    return name[cut:]


def _squash(name: str) -> str:
    return "".join(name.split())


def _int(pattern: re.Pattern[str], line: str) -> int:
    m = pattern.search(line)
    return int(m.group(1)) if m else 0
