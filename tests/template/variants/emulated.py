"""Running kernels on the host warp emulator (tests/data/template/variants/warp_emulator.h): a harness's end that
compares configurations with the original, and the build and run of such a harness."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from cutune.cuda.extract import extract_kernel
from cutune.cuda.parse import parse_source
from cutune.template.model import Value
from cutune.template.variants import Combined

from .compile import name_expressions

EMULATOR = Path(__file__).resolve().parents[2] / "data" / "template" / "variants" / "warp_emulator.h"

# the end of a harness whose `run(kernel, block...)` returns a kernel's outputs: the original at 1,024 threads, then
# each configuration's worst difference from it (`{runs}` prints `i worst` lines)
COMPARED = """
  const auto original = run({original}, 1024);
  auto worst = [&](const std::vector<float>& got) {{
    float d = 0.f;
    for (size_t i = 0; i < got.size(); ++i) d = std::fmax(d, std::fabs(got[i] - original[i]));
    return d;
  }};
{runs}
}}
"""


def emulated(tmp_path: Path) -> dict[int, float]:
    """`emulated.cpp` (in `tmp_path`) built with g++ and run: each configuration's worst difference from the
    original."""
    build = ["g++", "-std=c++20", "-O1", "-pthread", "-w", f"-I{tmp_path}", str(tmp_path / "emulated.cpp")]
    done = subprocess.run([*build, "-o", str(tmp_path / "emulated")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    ran = subprocess.run([str(tmp_path / "emulated")], capture_output=True, text=True, timeout=120, check=True)
    return {int(i): float(d) for i, d in (line.split() for line in ran.stdout.strip().split("\n"))}


def emulated_unit(
    combined: Combined, path: Path, kernel: str, configs: Sequence[Mapping[str, Value]], tmp_path: Path
) -> tuple[str, list[str]]:
    """The compile unit of `kernel` (of `path`, combined with its variants) at `configs`, for the emulator: its CUDA
    headers in `tmp_path` stand for the emulator; and each configuration's name expression."""
    assert combined.spec is not None
    expressions = name_expressions(combined.template, combined.spec, configs)
    unit = extract_kernel(parse_source(combined.template.source, str(path)), kernel, instantiations=expressions)
    for header in ("cuda_runtime.h", "cuda_bf16.h"):
        (tmp_path / header).write_text(f'#include "{EMULATOR}"\n')
    return unit.source, expressions
