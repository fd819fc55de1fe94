"""Building the capture cases' kernels the way their projects do: a PyTorch extension with the serving flags, or
a shared library with `nvcc` for the plain CUDA case (loaded with ctypes)."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
# PyTorch's builder defines __CUDA_NO_HALF_OPERATORS__ and friends; serving projects undefine them
SERVING_FLAGS = [
    "-O3",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
]


def torch_extension(name: str, source: Path, build: Path, flags: list[str] | None = None) -> ModuleType:
    """The layernorm ops of `source` with their bindings, built (or reused) in `build`."""
    from torch.utils.cpp_extension import load

    build.mkdir(parents=True, exist_ok=True)
    return load(
        name=name,
        sources=[str(source), str(HERE / "layernorm_ops.cpp")],
        extra_cuda_cflags=SERVING_FLAGS + (flags or []),
        build_directory=str(build),
        verbose=False,
    )


def shared_library(source: Path, build: Path, flags: list[str] | None = None) -> ctypes.CDLL:
    """`source` compiled by nvcc into a shared library (with the shared CUDA runtime, as a Python package
    links it) and loaded."""
    build.mkdir(parents=True, exist_ok=True)
    out = build / (source.stem + ".so")
    if not out.exists() or out.stat().st_mtime < source.stat().st_mtime:
        cmd = ["nvcc", "-O3", "-std=c++17", "-arch=native", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared",
               *(flags or []), "-o", str(out), str(source)]  # fmt: skip
        subprocess.run(cmd, check=True)
    return ctypes.CDLL(str(out))
