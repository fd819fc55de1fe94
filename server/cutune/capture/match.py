"""Matching logged launches to the kernels a workspace defines, and reading their arguments by the signature."""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cutune.capture.demangle import KernelName, demangle, kernel_name
from cutune.capture.log import CaptureLog, LoggedLaunch
from cutune.cuda.model import Kernel
from cutune.cuda.parse import outline, parse_source
from cutune.errors import CutuneError
from cutune.source_file import read_source
from cutune.template.dtypes import C_TYPES, dtype_size, parse_c_type

SOURCE_SUFFIXES = (".cu", ".cuh")
_SKIPPED_DIRS = frozenset({"node_modules", "build", "dist", "__pycache__", "site-packages"})
# torch's element types have CUDA's layout: a spec compiles the kernel without torch, so it names CUDA's
TORCH_TYPES = {"c10::BFloat16": "__nv_bfloat16", "at::BFloat16": "__nv_bfloat16", "c10::Half": "__half",
               "at::Half": "__half"}  # fmt: skip
_FORMATS = {"float32": "<f", "float64": "<d", "float16": "<e", "int8": "<b", "uint8": "<B", "int16": "<h",
            "uint16": "<H", "int32": "<i", "uint32": "<I", "int64": "<q", "bool": "<?"}  # fmt: skip

Number = int | float | bool
POINTER_BYTES = 8  # x86-64 and aarch64, the hosts CUDA 13 runs on


def source_files(root: Path) -> Iterator[Path]:
    """The workspace's CUDA sources, skipping hidden folders (`.git`, `.cutune`, `.venv`) and build output."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS)
        for f in sorted(files):
            if f.endswith(SOURCE_SUFFIXES):
                yield Path(folder) / f


def workspace_kernels(root: Path, only: Iterable[str] = ()) -> dict[str, list[Path]]:
    """Kernel name → the files that define it (a cheap outline of each file; `only` keeps those names)."""
    wanted = set(only)
    found: dict[str, list[Path]] = {}
    for path in source_files(root):
        try:
            _, text = read_source(path)
        except CutuneError:
            continue
        for name, _line in outline(text, str(path)).kernels:
            if not wanted or name in wanted:
                found.setdefault(name, []).append(path)
    return found


@dataclass(frozen=True)
class Captured:
    """One logged launch of a workspace kernel, read by its signature."""

    path: Path
    kernel: Kernel
    name: KernelName
    launch: LoggedLaunch
    template_args: dict[str, str]  # template parameter → C++ text (torch types as CUDA's)
    scalars: dict[str, Number]  # scalar parameter → value
    extents: dict[str, int]  # pointer parameter → bytes left in its allocation
    problem: str | None = None  # why arguments could not be read, if they could not


def matched_launches(log: CaptureLog, kernels: dict[str, list[Path]]) -> tuple[list[Captured], list[str]]:
    """The log's launches of the given kernels, read by their signatures; and notes on launches left out."""
    names = demangle(launch.name for launch in log.launches)
    models: dict[Path, dict[str, Kernel]] = {}
    out, notes = [], []
    for launch in log.launches:
        kname = kernel_name(names[launch.name])
        kernel = _find(kname, kernels, models, launch)
        if kernel is None:
            continue
        path, k = kernel
        out.append(_read(path, k, kname, launch))
    for c in out:
        if c.problem:
            notes.append(f"{c.kernel.name}: {c.problem}")
    return out, notes


def _find(
    kname: KernelName, kernels: dict[str, list[Path]], models: dict[Path, dict[str, Kernel]], launch: LoggedLaunch
) -> tuple[Path, Kernel] | None:
    """The workspace kernel a demangled name is: same name, and the same namespace where both have one; where
    files define kernels of the same name (a training and an inference copy), the one whose parameter count is
    the launch's."""
    found = []
    for path in kernels.get(kname.name, ()):
        if path not in models:
            _, text = read_source(path)
            models[path] = {k.name: k for k in parse_source(text, str(path)).kernels}
        k = models[path].get(kname.name)
        if k is not None and (not kname.namespace or k.namespace.endswith(kname.namespace) or not k.namespace):
            found.append((path, k))
    fits = [(p, k) for p, k in found if launch.params is not None and len(launch.params) == len(k.params)]
    return next(iter(fits or found), None)


def _read(path: Path, kernel: Kernel, kname: KernelName, launch: LoggedLaunch) -> Captured:
    targs = {t.name: _cuda_types(v) for t, v in zip(kernel.template_params, kname.template_args, strict=False)}
    scalars: dict[str, Number] = {}
    extents: dict[str, int] = {}
    problem = None
    if launch.params is None:
        problem = f"arguments not recorded ({launch.why or 'unknown layout'})"
    elif len(launch.params) != len(kernel.params):
        problem = f"launched with {len(launch.params)} parameters, the source declares {len(kernel.params)}"
    else:
        for p, value in zip(kernel.params, launch.params, strict=True):
            c_type = parse_c_type(p.type)
            base = targs.get(c_type.base, c_type.base)
            dtype = C_TYPES.get(base) or C_TYPES.get(base.removeprefix("std::"))
            declared = POINTER_BYTES if c_type.pointer else dtype_size(dtype) if dtype else value.size
            if declared != value.size:  # the program runs another build of the kernel than the source shows
                problem = f"{p.name} is {value.size} bytes at the launch, {declared} as `{p.type}` in the source"
                break
            if c_type.pointer:
                if value.extent is not None:
                    extents[p.name] = value.extent
                continue
            decoded = decode_scalar(value.raw, dtype) if dtype else int.from_bytes(value.raw, "little")
            if decoded is not None:  # a type no dtype names (a struct by value): its bytes, as one integer
                scalars[p.name] = decoded
    return Captured(path, kernel, kname, launch, targs, scalars, extents, problem)


_TORCH_TYPE = re.compile(r"\b(?:c10|at)::(?:BFloat16|Half)\b")


def _cuda_types(text: str) -> str:
    """Template argument text with torch's element types written as CUDA's (`silu<c10::Half>` → `silu<__half>`)."""
    return _TORCH_TYPE.sub(lambda m: TORCH_TYPES[m.group(0)], text)


def decode_scalar(raw: bytes, dtype: str) -> Number | None:
    """A scalar argument's value from its bytes (little-endian, as the GPU reads it); None if sizes differ."""
    if dtype == "bfloat16":
        return struct.unpack("<f", b"\0\0" + raw)[0] if len(raw) == 2 else None
    fmt = _FORMATS.get(dtype)
    if fmt is None or struct.calcsize(fmt) != len(raw):
        return None
    value = struct.unpack(fmt, raw)[0]
    return float(value) if isinstance(value, float) else value
