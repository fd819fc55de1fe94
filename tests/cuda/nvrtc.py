"""A minimal NVRTC driver over ctypes, so compile units can be checked for NVRTC without a GPU."""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
from pathlib import Path


def find_libnvrtc() -> str | None:
    """The path of libnvrtc: $CUTUNE_NVRTC_LIB, the CUDA toolkit, or the nvidia-cuda-nvrtc wheel."""
    candidates = [os.environ.get("CUTUNE_NVRTC_LIB", "")]
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    candidates += sorted(glob.glob(f"{cuda_home}/lib64/libnvrtc.so*"))
    spec = importlib.util.find_spec("nvidia")
    for root in spec.submodule_search_locations or [] if spec else []:
        candidates += sorted(glob.glob(f"{root}/cu*/lib/libnvrtc.so*"))
    return next((c for c in candidates if c and Path(c).is_file() and "builtins" not in c), None)


def compile_ptx(source: str, options: list[str], name_expressions: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """Compile with NVRTC: (PTX, name expression → lowered name); raises RuntimeError with the log."""
    lib_path = find_libnvrtc()
    if lib_path is None:
        raise FileNotFoundError("libnvrtc not found")
    for builtins in sorted(glob.glob(str(Path(lib_path).parent / "libnvrtc-builtins.so*"))):
        # loaded first so NVRTC finds it by soname even where its folder is not on the loader path
        if ".alt." not in builtins:
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(lib_path)
    prog = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"unit.cu", 0, None, None))
    try:
        for expr in name_expressions:
            _check(lib, lib.nvrtcAddNameExpression(prog, expr.encode()))
        argv = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
        status = lib.nvrtcCompileProgram(prog, len(options), argv)
        if status != 0:
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, log)
            raise RuntimeError(log.value.decode(errors="replace"))
        size = ctypes.c_size_t()
        _check(lib, lib.nvrtcGetPTXSize(prog, ctypes.byref(size)))
        ptx = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvrtcGetPTX(prog, ptx))
        lowered: dict[str, str] = {}
        for expr in name_expressions:
            name = ctypes.c_char_p()
            _check(lib, lib.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(name)))
            lowered[expr] = (name.value or b"").decode()
        return ptx.value.decode(), lowered
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _check(lib: ctypes.CDLL, status: int) -> None:
    if status != 0:
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise RuntimeError(f"NVRTC error {status}: {lib.nvrtcGetErrorString(status).decode()}")
