"""Capture logs written the way the recorder writes them, for tests that run no program."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

RMS_BF16 = "_ZN4vllm15rms_norm_kernelIN3c108BFloat16EEEvPT_PKS3_S6_fii"
RMS_HALF = "_ZN4vllm15rms_norm_kernelIN3c104HalfEEEvPT_PKS3_S6_fii"


@dataclass(frozen=True)
class Arg:
    """A launched argument: a device pointer with the bytes left in its allocation, or a scalar's bytes."""

    raw: bytes
    extent: int | None = None


def ptr(address: int, extent: int) -> Arg:
    return Arg(struct.pack("<Q", address), extent)


def i32(value: int) -> Arg:
    return Arg(struct.pack("<i", value))


def f32(value: float) -> Arg:
    return Arg(struct.pack("<f", value))


def launch(
    name: str, grid: tuple[int, ...], block: tuple[int, ...], args: list[Arg], count: int, *, smem: int = 0
) -> dict[str, object]:
    """A log line: parameters laid out as the driver reports them (each aligned to its size)."""
    params, offset = [], 0
    for a in args:
        offset = -(-offset // len(a.raw)) * len(a.raw)
        params.append({"offset": offset, "size": len(a.raw), "hex": a.raw.hex(), "extent": a.extent})
        offset += len(a.raw)
    dims = lambda d: [*d, 1, 1, 1][:3]  # noqa: E731
    return {"name": name, "api": "__cudaLaunchKernel", "grid": dims(grid), "block": dims(block), "smem": smem,
            "layout": "cuFuncGetParamInfo", "params": params, "count": count}  # fmt: skip


def rms_launch(
    name: str, tokens: int, hidden: int, count: int, *, elem: int = 2, weight_extent: int | None = None
) -> dict[str, object]:
    """A launch of the vLLM-style rms_norm_kernel as its host code makes it (grid = tokens, block = min(h, 1024))."""
    rows = tokens * hidden * elem
    return launch(
        name,
        (tokens,),
        (min(hidden, 1024),),
        [
            ptr(0x7F0000000000, rows + 512),
            ptr(0x7F0001000000, rows),
            ptr(0x7F0002000000, weight_extent or hidden * elem),
            f32(1e-6),
            i32(tokens),
            i32(hidden),
        ],
        count,
    )


def write_log(path: Path, launches: list[dict[str, object]], *, command: str = "python bench.py") -> Path:
    header = {
        "format": "cutune-capture",
        "version": 1,
        "device": "NVIDIA H100 80GB HBM3",
        "date": "2026-11-25T13:00:00Z",
        "command": command.split(),
        "errors": [],
        "data_dir": None,
        "failed_processes": [],
    }
    path.write_text("\n".join(json.dumps(x) for x in [header, *launches]) + "\n", encoding="utf-8")
    return path
