"""Code actions: templatize as a rewrite (line edits + the drafted spec), quick fixes for cutune's diagnostics."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from lsprotocol import types

from tests.lsp.editor import DATA, Editor, copy_workspace

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _document_edits(action: types.CodeAction) -> list[types.TextDocumentEdit | types.CreateFile]:
    assert action.edit is not None and action.edit.document_changes is not None
    return [c for c in action.edit.document_changes if isinstance(c, types.TextDocumentEdit | types.CreateFile)]


async def test_templatize_is_a_line_based_rewrite_that_creates_the_spec(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("lenses", tmp_path))
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    actions = await editor.actions(uri, 5, only=["refactor"])
    # the guarded one-element body reads as a grid-stride loop (canonical form): its variants are offered too
    rewrites = [a.title.split(" ")[4] for a in actions if a.title.startswith("Rewrite scale_kernel as variant ")]
    assert rewrites == ["vectorized", "packs_per_thread"]
    actions = [a for a in actions if a.title.startswith("Templatize ")]
    assert [(a.title, a.kind) for a in actions] == [
        (
            "Templatize scale_kernel (BLOCK_THREADS, ITEMS_PER_THREAD, FAST_MATH, MAXRREGCOUNT)",
            types.CodeActionKind.RefactorRewrite,
        )
    ]
    source, create, spec = _document_edits(actions[0])
    assert isinstance(source, types.TextDocumentEdit) and source.text_document.version == 1
    lines = editor.text(uri).count("\n")
    assert len(source.edits) == 3  # the struct, the template line and body, the launch: not one big replace
    assert all(
        e.range.end.line - e.range.start.line < lines // 2 for e in source.edits if isinstance(e, types.TextEdit)
    )
    assert create == types.CreateFile(
        uri=editor.uri("scale.tune.toml"), options=types.CreateFileOptions(ignore_if_exists=True)
    )
    assert isinstance(spec, types.TextDocumentEdit) and spec.text_document.uri == editor.uri("scale.tune.toml")
    assert spec.edits[0].new_text.startswith("[kernel.scale_kernel]\n")


async def test_templatize_only_rewrites_when_the_spec_exists(editor: Editor, tmp_path: Path) -> None:
    root = copy_workspace("lenses", tmp_path)
    other = (DATA / "autotune" / "scale.tune.toml").read_text().replace("scale_kernel", "other_kernel")
    (root / "scale.tune.toml").write_text(other)
    editor.use(root)
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    action = (await editor.actions(uri, 5, only=["refactor.rewrite"]))[0]
    changes = _document_edits(action)
    assert [type(c) for c in changes] == [types.TextDocumentEdit, types.TextDocumentEdit]  # no CreateFile
    appended = changes[1]
    assert isinstance(appended, types.TextDocumentEdit)
    assert appended.edits[0].range.start == types.Position(line=other.count("\n"), character=0)
    assert appended.edits[0].new_text.startswith("\n[kernel.scale_kernel]\n")


async def test_hints_offer_templatize_as_their_quick_fix(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("lenses", tmp_path))
    uri = editor.open("scale.cu")
    hint = next(d for d in await editor.diagnostics(uri) if d.range.start.line == 16)
    fixes = await editor.actions(uri, 16, diagnostics=[hint], only=["quickfix"])
    assert [(f.title.split(" (")[0], list(f.diagnostics or []), f.is_preferred) for f in fixes] == [
        ("Templatize scale_kernel", [hint], True)
    ]


async def test_a_missing_spec_offers_a_draft(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("diagnostics/spec_missing", tmp_path))
    uri = editor.open("scale.cu")
    warning = next(d for d in await editor.diagnostics(uri) if d.code == "spec-missing")
    fixes = await editor.actions(uri, 10, diagnostics=[warning], only=["quickfix"])
    assert [f.title for f in fixes] == ["Draft a tuning spec for scale_kernel"]
    assert [type(c) for c in _document_edits(fixes[0])] == [types.CreateFile, types.TextDocumentEdit]


async def test_a_result_offers_to_apply_it(editor: Editor, tuned: Path) -> None:
    editor.use(tuned)
    uri = editor.open("scale.cu")
    info = next(d for d in await editor.diagnostics(uri) if d.code == "tuned")
    fixes = await editor.actions(uri, 10, diagnostics=[info], only=["quickfix"])
    assert [f.title for f in fixes] == [
        "Apply tuned configuration of scale_kernel (1.35× replayed from scale.recording.jsonl "
        f"(Synthetic GPU (test-only), {date.today().isoformat()}))"
    ]
    (change,) = _document_edits(fixes[0])
    assert isinstance(change, types.TextDocumentEdit)
    assert [e.new_text for e in change.edits if isinstance(e, types.TextEdit)] == [
        "  static constexpr int BLOCK_THREADS = 256;   // threads per block\n"
        "  static constexpr int ITEMS_PER_THREAD = 2;  // consecutive block-chunks each thread handles "
        "(the grid shrinks by as much)\n"
    ]


async def test_no_actions_outside_kernels(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("lenses", tmp_path))
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    assert await editor.actions(uri, 0, wait=False) == []
