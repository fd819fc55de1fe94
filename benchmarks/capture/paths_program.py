"""A small program calling the three launch paths of launch_paths.cu at three sizes and two dtypes (through
ctypes, on torch tensors): what `cutune capture` records in the GPU test. Usage: paths_program.py WORKSPACE
[--build-only] (the library is built from WORKSPACE/.orig/launch_paths.cu)."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extension import shared_library

DTYPES = ((torch.bfloat16, 2, 2), (torch.float16, 1, 1))  # (dtype, code in the library, launches per call site)
ROWS_COLS = ((8, 4096), (512, 4096), (4096, 8192))
CALLS = (12, 4, 1)  # how often each size runs


def run(lib: ctypes.CDLL, dtype: torch.dtype, code: int, size: tuple[int, int], seed: int = 0) -> list[torch.Tensor]:
    """Every op once at one size; their outputs."""
    rows, cols = size
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(rows, cols, dtype=dtype, device="cuda", generator=g)
    scale = torch.rand(rows, device="cuda", generator=g)
    bias = torch.randn(cols, dtype=dtype, device="cuda", generator=g)
    outs = [torch.empty_like(x) for _ in range(3)]
    p = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
    n = rows * cols
    assert lib.scale_rows(code, p(outs[0]), p(x), p(scale), rows, cols) == 0
    assert lib.add_bias(code, p(outs[1]), p(x), p(bias), n, cols) == 0
    assert lib.gelu(code, p(outs[2]), p(x), n) == 0
    return outs


def main(work: Path, build_only: bool) -> None:
    lib = shared_library(work / ".orig" / "launch_paths.cu", work / ".build" / "orig")
    if build_only:
        return
    for dtype, code, repeat in DTYPES:
        for size, calls in zip(ROWS_COLS, CALLS, strict=True):
            for _ in range(calls * repeat):
                run(lib, dtype, code, size)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(Path(sys.argv[1]), "--build-only" in sys.argv[2:])
