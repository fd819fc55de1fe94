"""The Templatize actions offer each structural variant of a kernel as a reviewed rewrite (a workspace edit
the user sees before accepting); a variant whose launch the host cannot spell is not offered."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from cutune.cuda.parse import parse_source
from tests.lsp.editor import Editor, copy_workspace

pytestmark = pytest.mark.asyncio(loop_scope="module")

ADD_KERNEL_LINE = 17  # `__global__ void add_kernel(...)` in tests/data/lsp/autotune/scale.cu (0-based)


async def test_each_variant_is_a_rewrite_the_user_reviews(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("autotune", tmp_path))
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    actions = await editor.actions(uri, ADD_KERNEL_LINE, only=["refactor.rewrite"])
    variants = [a for a in actions if a.title.startswith("Rewrite add_kernel as variant ")]
    names = [a.title.removeprefix("Rewrite add_kernel as variant ").split(" ")[0] for a in variants]
    # persistent_grid's launch reads the SM count, which the host code has no name for: not offered
    assert names == ["vectorized", "packs_per_thread"]
    assert all(a.kind == types.CodeActionKind.RefactorRewrite and a.edit is not None for a in variants)
    assert "(vectorize: " in variants[0].title and "VEC_BYTES" in variants[0].title
    before = editor.text(uri)
    assert editor.text(uri) == before  # offering changes nothing: the edit waits for the user
    assert variants[0].edit is not None
    editor.apply_edit(types.ApplyWorkspaceEditParams(edit=variants[0].edit))
    after = editor.text(uri)
    assert "// cutune: variant vectorized (vectorize" in after and "struct add_kernel_tuning {" in after
    assert "VEC_BYTES" in after and "if constexpr (VARIANT" not in after
    model = parse_source(after)
    assert {k.name for k in model.kernels} == {"scale_kernel", "add_kernel"} and not model.issues


async def test_a_kernel_with_no_variant_offers_none(editor: Editor, tmp_path: Path) -> None:
    root = copy_workspace("autotune", tmp_path)
    # threads of a block count together at a barrier (`__syncthreads_count`): every transform refuses
    (root / "block_sum.cu").write_text(
        "__global__ void block_sum_kernel(int* out, const float* in) {\n"
        "  const int positive = __syncthreads_count(in[blockIdx.x * 256 + threadIdx.x] > 0.f);\n"
        "  if (threadIdx.x == 0) out[blockIdx.x] = positive;\n"
        "}\n"
    )
    editor.use(root)
    uri = editor.open("block_sum.cu")
    await editor.diagnostics(uri)
    actions = await editor.actions(uri, 0, only=["refactor.rewrite"])
    assert not [a for a in actions if "as variant" in a.title]
