"""A small program calling the vLLM-style RMSNorm op at three shapes and two dtypes: what `cutune capture`
records in the GPU test. Usage: layernorm_program.py WORKSPACE [--build-only]."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extension import torch_extension

# (tokens, hidden): how often each runs; decode sizes dominate serving, so they run most
SHAPES = (((4, 4096), 24), ((256, 4096), 6), ((2048, 8192), 2))
DTYPES = ((torch.bfloat16, 2), (torch.float16, 1))  # bf16 is launched more: the spec keeps it


def main(work: Path, build_only: bool) -> None:
    ops = torch_extension("capture_ln_orig", work / ".orig" / "layernorm_kernels.cu", work / ".build" / "orig")
    if build_only:
        return
    torch.manual_seed(0)
    for dtype, repeat in DTYPES:
        for (tokens, hidden), calls in SHAPES:
            x = torch.randn(tokens, hidden, dtype=dtype, device="cuda")
            w = torch.randn(hidden, dtype=dtype, device="cuda")
            out = torch.empty_like(x)
            for _ in range(calls * repeat):
                ops.rms_norm(out, x, w, 1e-6)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(Path(sys.argv[1]), "--build-only" in sys.argv[2:])
