"""The quick scan that answers lenses before tree-sitter is done agrees with the source model."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutune.cuda.parse import parse_source
from cutune.lsp.scan import KernelHeader, scan_kernels

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted([*ROOT.glob("tests/data/**/*.cu"), *ROOT.glob("samples/*.cu")])


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_scan_finds_the_models_kernels(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    model = parse_source(text)
    scanned = [(h.name, h.line) for h in scan_kernels(text)]
    parsed = [(k.name, k.span.start.line) for k in model.kernels]
    if model.issues:  # where tree-sitter gives up on a region, the scan may see kernels it does not
        assert set(parsed) <= set(scanned)
    else:
        assert scanned == parsed


def test_comments_declarations_and_attributes() -> None:
    text = """// __global__ void in_a_comment(float* x) {}
/* __global__ void in_a_block(float* x) {} */
__global__ void declared_only(float* x);
template <typename T,
          int N>
__global__ void __launch_bounds__(256, 2) bounded(T* x) { x[0] = N; }
struct bounded_tuning { static constexpr int N = 1; };
"""
    assert scan_kernels(text) == (KernelHeader("bounded", 3, templatized=True),)
