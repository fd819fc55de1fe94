"""NVRTC behind the compiler interface, without a GPU: a unit to a cubin through the NVRTC library (ctypes),
with ptxas' report and the lowered names of its name expressions.

`check` and the tune backend both compile through it (CuPy only loads the cubin), so "compiles in check"
means "compiles in tune". NVRTC calls release the GIL, so threads compile in parallel.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import importlib.util
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cutune.cuda.extract import CompileUnit
from cutune.errors import CompileError
from cutune.gpu.compiler import STD_FLAG, Compiler, CompilerOutput, KernelRequest, Target, user_std

UNIT_NAME = "unit.cu"


@dataclass(frozen=True)
class NvrtcOutput:
    """A successful compile: the program log (ptxas' report with `-Xptxas=-v`) and the lowered names."""

    log: str
    lowered: dict[str, str]  # name expression → mangled name
    binary: bytes  # the cubin for a real `-arch=sm_XX`, else the PTX


DEVICE_DEFAULT = "--device-as-default-execution-space"


class NvrtcCompiler(Compiler):
    """NVRTC through its library: one unit holds every instantiation, each found by its lowered name."""

    name = "nvrtc"
    for_nvrtc = True

    def options(self, unit: CompileUnit, target: Target) -> tuple[str, ...]:
        """-arch, the default standard, functions without an execution space read as device ones (a project
        header's small host helpers, `inline int blocks(int n)`, which NVRTC otherwise rejects: the unit calls none
        from host code, having none), the unit's -I/-D/-U, the toolkit's headers (CCCL too) after them, as nvcc
        searches its system folders after every -I (a unit's stand-in for a toolkit header comes first), the
        flags, and ptxas' report."""
        std = () if user_std(target.flags) else (STD_FLAG,)
        toolkit = tuple(f"-I{d}" for d in cuda_include_dirs())
        return (f"-arch={target.arch}", *std, DEVICE_DEFAULT, *unit.options(), *toolkit, *target.flags, "-Xptxas=-v")

    def version(self) -> str:
        return nvrtc_version()

    def units(self, request: KernelRequest) -> list[CompileUnit]:
        return [request.make_unit(tuple(dict.fromkeys(request.expressions)), True)]

    def _run(self, unit: CompileUnit, options: tuple[str, ...], target: Target) -> CompilerOutput:
        out = compile_program(unit.source, options, unit.name_expressions)
        return CompilerOutput(out.log, out.binary, out.lowered)


def find_libnvrtc() -> str | None:
    """The path of libnvrtc: $CUTUNE_NVRTC_LIB, the CUDA toolkit, or the nvidia-cuda-nvrtc wheel."""
    candidates = [os.environ.get("CUTUNE_NVRTC_LIB", "")]
    candidates += sorted(glob.glob(f"{cuda_home()}/lib64/libnvrtc.so*"))
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidates += sorted(glob.glob(f"{root}/cu*/lib/libnvrtc.so*"))
    return next((c for c in candidates if c and Path(c).is_file() and "builtins" not in c), None)


def cuda_home() -> str:
    """The CUDA toolkit's folder: $CUDA_PATH or $CUDA_HOME, the one nvcc lives in, else /usr/local/cuda."""
    for var in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(var):
            return os.environ[var]
    nvcc = shutil.which("nvcc")
    root = Path(nvcc).resolve().parent.parent if nvcc else None
    if root is not None and (root / "include" / "cuda_runtime.h").is_file():
        return str(root)
    return "/usr/local/cuda"  # nvcc may be a wrapper script elsewhere on PATH


def cuda_include_dirs() -> tuple[str, ...]:
    """The toolkit's header folders NVRTC needs (CUDA 13 keeps CCCL apart, under include/cccl)."""
    include = Path(cuda_home()) / "include"
    return tuple(str(d) for d in (include, include / "cccl") if d.is_dir())


@functools.cache
def _library() -> ctypes.CDLL:
    path = find_libnvrtc()
    if path is None:
        raise CompileError("libnvrtc not found (no CUDA toolkit lib64/ nor nvidia-cuda-nvrtc wheel)")
    for builtins in sorted(glob.glob(str(Path(path).parent / "libnvrtc-builtins.so*"))):
        # loaded first so NVRTC finds it by soname even where its folder is not on the loader path
        if ".alt." not in builtins:
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(path)
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    return lib


@functools.cache
def nvrtc_version() -> str:
    """NVRTC's version, e.g. '13.0'; raises CompileError when libnvrtc is missing."""
    major, minor = ctypes.c_int(), ctypes.c_int()
    _library().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


def compile_program(source: str, options: Sequence[str], name_expressions: Sequence[str] = ()) -> NvrtcOutput:
    """Compile `source` with NVRTC; raises CompileError with NVRTC's log when it fails."""
    lib = _library()
    prog = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), UNIT_NAME.encode(), 0, None, None))
    try:
        for expr in name_expressions:
            _check(lib, lib.nvrtcAddNameExpression(prog, expr.encode()))
        argv = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
        status = lib.nvrtcCompileProgram(prog, len(options), argv)
        log = _read(lib, prog, "ProgramLog")
        if status != 0:
            raise CompileError(f"NVRTC could not compile {UNIT_NAME}:", log=log.strip())
        real = any(o.startswith(("-arch=sm_", "--gpu-architecture=sm_")) for o in options)
        binary = _read_bytes(lib, prog, "CUBIN" if real else "PTX")
        lowered: dict[str, str] = {}
        for expr in name_expressions:
            name = ctypes.c_char_p()
            _check(lib, lib.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(name)))
            lowered[expr] = (name.value or b"").decode()
        return NvrtcOutput(log, lowered, binary)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _read(lib: ctypes.CDLL, prog: ctypes.c_void_p, what: str) -> str:
    return _read_bytes(lib, prog, what).rstrip(b"\0").decode(errors="replace")


def _read_bytes(lib: ctypes.CDLL, prog: ctypes.c_void_p, what: str) -> bytes:
    size = ctypes.c_size_t()
    _check(lib, getattr(lib, f"nvrtcGet{what}Size")(prog, ctypes.byref(size)))
    buffer = ctypes.create_string_buffer(size.value)
    _check(lib, getattr(lib, f"nvrtcGet{what}")(prog, buffer))
    return buffer.raw


def _check(lib: ctypes.CDLL, status: int) -> None:
    if status != 0:
        raise CompileError(f"NVRTC error {status}: {lib.nvrtcGetErrorString(status).decode()}")
