"""split_items: one-block-per-item kernels run each item on SPLIT blocks; the loop transforms chain onto it
(split, then vectorised) and the chained variant stands in for the plain one. Checked textually, by
compiling, and by the reasons it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.project import open_kernel
from cutune.template.variants import VARIANT, Launch, SplitItems, combine_all
from cutune.template.variants.chain import composed
from cutune.template.variants.split import START, STEP
from tests.cuda.test_extract import needs_nvrtc

from .compile import compile_both, name_expressions

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
PER_ITEM = """
__global__ void k(float* __restrict__ out, const float* __restrict__ x, int d) {{
  const long row = blockIdx.x;
  {before}
  for (int i = threadIdx.x; i < d; i += blockDim.x) {{
    {body}
  }}
  {after}
}}
"""


def _refusal(before: str = "", body: str = "out[row * d + i] = x[row * d + i];", after: str = "") -> str:
    source = PER_ITEM.format(before=before, body=body, after=after)
    with pytest.raises(TransformRefused) as caught:
        SplitItems().apply(parse_source(source), "k", None)
    return caught.value.reason


def test_split_moves_each_item_over_split_blocks_on_the_grid_y_axis() -> None:
    variant = SplitItems().apply(parse_source(PER_ITEM.format(before="", body="out[i] = x[i];", after="")), "k", None)
    assert f"for (int i = {START}; i < d; i += {STEP})" in variant.body
    assert "const long row = blockIdx.x;" in variant.body
    assert variant.launch == Launch(grid=("{grid}", "SPLIT"), block=("{block}",))
    assert [(p.name, p.default) for p in variant.params] == [("SPLIT", 1)]  # 1: the original


def test_split_refuses_where_blocks_of_one_item_would_need_each_other() -> None:
    assert "cooperate through __syncthreads" in _refusal(body="out[i] = x[i]; __syncthreads();")
    assert "carries s from one iteration to the next" in _refusal(before="float s = 0.f;", body="s += x[i];")
    assert "out[row] is written outside the loops" in _refusal(after="out[row] = 0.f;")
    assert "threadIdx.x is read outside the loops" in _refusal(before="if (threadIdx.x == 0) d = d;")
    assert "reads the grid's y or z axis already" in _refusal(before="const int h = blockIdx.y;")
    assert "atomicAdd is called outside the loops" in _refusal(after="atomicAdd(out, 1.f);")
    grid_stride = "__global__ void k(float* o, int n) { for (int i = blockIdx.x * blockDim.x + threadIdx.x; "
    grid_stride += "i < n; i += blockDim.x * gridDim.x) o[i] = 0; }"
    with pytest.raises(TransformRefused, match="grid-stride already"):
        SplitItems().apply(parse_source(grid_stride), "k", None)
    no_item = "__global__ void k(float* o, int n) { for (int i = threadIdx.x; i < n; i += blockDim.x) o[i] = 0; }"
    with pytest.raises(TransformRefused, match="not one block per work item"):
        SplitItems().apply(parse_source(no_item), "k", None)


def test_chained_launches_put_the_parents_launch_in_the_childs_placeholders() -> None:
    parent = Launch(grid=("{grid}", "SPLIT"), block=("{block}",))
    child = Launch(grid=("{grid}",), block=("max(min(warp_size, {block}), {block} / BLOCK_DIV)",))
    assert composed(parent, child) == Launch(
        grid=("({grid})", "SPLIT"), block=("max(min(warp_size, ({block})), ({block}) / BLOCK_DIV)",)
    )
    assert composed(parent, None) == parent and composed(None, child) == child


def _combined(file: str, kernel: str):  # type: ignore[no-untyped-def]
    ctx = open_kernel(SAMPLES / file, kernel)
    return combine_all(ctx.template_model, kernel, ctx.template, ctx.spec)


def test_on_the_elementwise_samples_the_loop_transforms_chain_onto_the_split() -> None:
    gated = _combined("gated_activation.cu", "act_and_mul_kernel")
    assert [v.name for v in gated.variants] == ["split_vectorized", "split_packs_per_thread", "split", "block_items"]
    assert [v.provenance.parent for v in gated.variants] == ["split", "split", "", ""]
    assert [p.name for p in gated.variants[0].params] == ["SPLIT", "VEC_BYTES", "PACKS", "BLOCK_DIV"]
    assert gated.spec is not None
    # SPLIT is shared by the three variants: free while any of them runs, pinned for the original
    assert f"{VARIANT} == 1 or {VARIANT} == 2 or {VARIANT} == 3 or SPLIT == 1" in gated.spec.constraints
    assert gated.spec.grid[0].endswith("if VARIANT == 4 else (num_tokens)")  # the split's item axis is the original's
    assert gated.spec.grid[1].startswith("(SPLIT) if VARIANT == 1 else")
    rotary = _combined("rotary_embedding.cu", "rotary_embedding_kernel")
    assert [v.name for v in rotary.variants] == ["split_vectorized", "split_packs_per_thread", "split", "block_items"]


@pytest.mark.nvcc
@needs_nvrtc
def test_the_split_variants_compile_with_nvcc_and_nvrtc_at_several_configurations(tmp_path: Path) -> None:
    gated = _combined("gated_activation.cu", "act_and_mul_kernel")
    assert gated.spec is not None
    configs = [
        {VARIANT: 1, "SPLIT": 4, "PACKS": 2, "VEC_BYTES": 8},
        {VARIANT: 1, "SPLIT": 16, "BLOCK_DIV": 4},
        {VARIANT: 2, "SPLIT": 8, "ITEMS": 4},
        {VARIANT: 3, "SPLIT": 2},
    ]
    expressions = name_expressions(gated.template, gated.spec, configs)
    entries, lowered = compile_both(gated.template, expressions, tmp_path)
    assert len(set(entries)) == 4 and set(lowered) == set(expressions)
