"""Applying a result whose sizes run structural variants: each dispatch branch launches its variant with the
variant's own grid and block (values written in), one variant everywhere is written as the kernel's only
body, and a launch the host cannot spell falls back to the original with a note. Compiled with nvcc."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from cutune.apply.dispatch import MARKER
from cutune.cuda.parse import parse_source
from cutune.gpu.backend import Timing
from cutune.project import KernelContext, open_kernel
from cutune.template.model import Config
from cutune.template.variants import VARIANT, Combined, GridShape, with_variants
from cutune.tune.dispatch import plan_dispatch
from cutune.tune.result import SizeResult, TuneResult
from cutune.workflow import apply_result, apply_to_source, variants_of, with_combined
from tests.agent.builders import dispatch_result

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
TORCH_STUB = Path(__file__).resolve().parent / "torch_stub"


def _nvcc(text: str, tmp_path: Path) -> None:
    source = tmp_path / "applied.cu"
    source.write_text(text)
    cmd = ["nvcc", "-std=c++17", "-arch=sm_90", "-c", f"-I{TORCH_STUB}", str(source), "-o", str(tmp_path / "a.o")]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def _combined(file: str, kernel: str) -> tuple[KernelContext, KernelContext]:
    base = open_kernel(SAMPLES / file, kernel)
    return base, with_combined(base, variants_of(base))


def _number(combined: KernelContext, name: str) -> int:
    description = next(p for p in combined.space.params if p.name == VARIANT).description
    found = re.search(rf"(\d+) = {name}\b", description)
    assert found, description
    return int(found.group(1))


@pytest.mark.nvcc
def test_split_at_prefill_and_the_original_at_decode_launch_as_measured(tmp_path: Path) -> None:
    base, combined = _combined("gated_activation.cu", "act_and_mul_kernel")
    split = {VARIANT: _number(combined, "split"), "SPLIT": 4}
    result = dispatch_result(combined, [{}, {}, {}, {}, split, split, split])  # num_tokens 1 ... 1000: the original
    applied = apply_result(base, result)
    text = applied.text
    host = text[text.index("void silu_and_mul_gated(") :]
    assert MARKER in host and applied.notes == ()
    assert "  if (num_tokens < 4096) {  // the original configuration" in host
    # only the variant some size launches is kept in the kernel, numbered 1 there
    assert split[VARIANT] > 1 and "  } else {  // SPLIT=4, VARIANT=1" in host
    kernel = text[: text.index("void silu_and_mul_gated(")]
    assert "if constexpr (VARIANT == 1) {  // variant split (" in kernel
    assert kernel.count("if constexpr (VARIANT == ") == 2  # the original and split: the other variants are gone
    # the split branch: grid y = SPLIT, the original block, VARIANT in the template arguments
    assert "act_and_mul_kernel<scalar_t, 0, 1><<<dim3(dim3(grid).x, 4), block, 0, stream>>>(" in host
    assert "<<<dim3(dim3(grid).x, 4), block, 0, stream>>>(" in host
    # the original branch launches as the file did
    assert host.count("<<<grid, block, 0, stream>>>(") == 1
    _nvcc(text, tmp_path)


@pytest.mark.nvcc
def test_row_reduce_at_prefill_launches_its_threads_per_row(tmp_path: Path) -> None:
    base, combined = _combined("rms_norm.cu", "rms_norm_kernel")
    k = _number(combined, "row_reduce")
    launch = variants_of(base).variants[k - 1].launch
    assert launch is not None
    rows = {VARIANT: k, "ROW_THREADS": 512}
    result = dispatch_result(combined, [{}, {}, {}, rows, rows, rows, rows])
    text = apply_result(base, result).text
    host = text[text.index("void rms_norm(") :]
    assert "  if (num_tokens < 2048) {  // the original configuration" in host
    row_launches = [m for m in re.findall(r"<<<([^>]*)>>>", host) if "512" in m]
    assert len(row_launches) == 2  # bf16 and half, each with the variant's block of ROW_THREADS threads
    for config in row_launches:
        grid, block = (part.strip() for part in config.split(",")[:2]) if "dim3(" not in config else (config, "")
        assert "num_tokens" in config and "512" in config, (grid, block)
    assert host.count("<<<grid, block, 0, stream>>>(") == 2  # the original branch, both dtypes
    _nvcc(text, tmp_path)


@pytest.mark.nvcc
def test_one_variant_at_every_size_is_written_as_the_kernel_body_with_its_launch(tmp_path: Path) -> None:
    base, combined = _combined("rms_norm.cu", "rms_norm_kernel")
    k = _number(combined, "row_reduce")
    small, large = {VARIANT: k, "ROW_THREADS": 128}, {VARIANT: k, "ROW_THREADS": 1024}
    applied = apply_result(base, dispatch_result(combined, [small, small, small, large, large, large, large]))
    text = applied.text
    assert "if constexpr (VARIANT" not in text and "VARIANT" not in text  # pruned: the variant's body only
    assert "cutune: variant row_reduce" in text and applied.notes[0].startswith("variant row_reduce runs at every")
    host = text[text.index("void rms_norm(") :]
    assert MARKER in host  # its threads per row still differ by size
    assert "dim3(1024, 1)" in host and "dim3(128, 1)" in host
    _nvcc(text, tmp_path)


def test_a_branch_whose_variant_launch_the_host_cannot_spell_launches_the_original() -> None:
    source = """
__global__ void k(float* o, long n) {
  for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)blockDim.x * gridDim.x) o[i] = 0;
}
void run(float* o, long n) { k<<<(n + 255) / 256, 256>>>(o, n); }
"""
    path = Path("/tmp/h9-unspellable.cu")
    base = open_kernel(path, "k", text=source)
    variant = GridShape().apply(base.template_model, "k", None)
    template, _ = with_variants(base.template_model, "k", [variant], None, base=base.template)
    combined = KernelContext(
        path, base.model, base.kernel, template, parse_source(template.source), base.spec_path, None, None
    )
    original = combined.space.default()
    persistent = Config.of({**original, VARIANT: 1, "BLOCKS_PER_SM": 8})
    sizes = [{"n": 1024}, {"n": 1 << 24}]
    result = TuneResult(
        kernel="k",
        source_path=str(path),
        source_hash="0",
        study="test",
        device="NVIDIA H200",
        arch="sm_90",
        date="2026-11-22",
        original=original,
        best=persistent,
        significant=True,
        sizes=tuple(
            SizeResult(s, Timing(s, 1, 1, 1, 1), Timing(s, 1, 1, 1, 1), c, Timing(s, 1, 1, 1, 1), True)
            for s, c in zip(sizes, [original, persistent], strict=True)
        ),
        trials=2,
        dispatch=plan_dispatch(sizes, [original, persistent], original),
    )
    applied = apply_result(base, result, combined=Combined(template, combined.template_model, None, (variant,), ()))
    assert applied.notes == (
        "16777216 ≤ n launches the original: variant persistent_grid's launch cannot be written there "
        "(the launch reads sm_count, which the host code has no name for)",
    )
    # every range launches the original now: the file is the templatized one at its defaults
    assert applied.text == apply_to_source(base, base.space.default()).text
    assert MARKER not in applied.text and VARIANT not in applied.text
