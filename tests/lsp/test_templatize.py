"""The Templatize command: one workspace edit (applied by the editor) rewrites the kernel and drafts its spec."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from tests.lsp.editor import Editor, copy_workspace

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_templatize_applies_the_rewrite_and_drafts_the_spec(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("lenses", tmp_path))
    opened = editor.lens_refreshes
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    await editor.wait(lambda: editor.lens_refreshes > opened)  # the opened text's lenses are made
    refreshed = editor.lens_refreshes
    reply = await editor.command("cutune.templatize", uri, "scale_kernel")
    assert reply == {"applied": True, "params": ["BLOCK_THREADS", "ITEMS_PER_THREAD", "FAST_MATH", "MAXRREGCOUNT"]}
    assert len(editor.applied) == 1 and editor.applied[0].label is not None
    assert "struct scale_kernel_tuning {" in editor.text(uri)
    spec = (editor.root / "scale.tune.toml").read_text()
    assert spec.startswith("[kernel.scale_kernel]\n")
    # the analysis of the new text: scale_kernel's hint is gone (add_kernel keeps its own), its lens too
    await editor.wait(lambda: {d.data["kernel"] for d in editor.published[uri][-1]} == {"add_kernel"})
    # the new text's lenses are made after its diagnostics; the server asks the editor to refresh once they are
    await editor.wait(lambda: editor.lens_refreshes > refreshed)
    titles = [lens.command.title for lens in await editor.lenses(uri) if lens.command and lens.range.start.line == 9]
    assert titles == ["Autotune"]


async def test_templatize_twice_changes_nothing(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("autotune", tmp_path))
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    reply = await editor.command("cutune.templatize", uri, "scale_kernel")
    assert reply == {"applied": False, "params": ["BLOCK_THREADS", "ITEMS_PER_THREAD", "FAST_MATH", "MAXRREGCOUNT"]}
    assert editor.applied == []
    assert editor.messages[-1].type == types.MessageType.Info


async def test_a_declined_edit_reports_not_applied(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("lenses", tmp_path))
    editor.accept_edits = False
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    assert (await editor.command("cutune.templatize", uri, "add_kernel"))["applied"] is False
    assert not (editor.root / "scale.tune.toml").exists()
    # the click did nothing: the user is told why
    assert editor.messages[-1].type == types.MessageType.Warning
    assert editor.messages[-1].message == "cutune: the editor did not apply the edit: declined by the test"


async def test_an_unknown_kernel_is_a_message(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("lenses", tmp_path))
    uri = editor.open("scale.cu")
    assert await editor.command("cutune.templatize", uri, "nope") == {"applied": False, "params": []}
    assert editor.messages[-1].type == types.MessageType.Warning
    assert "no __global__ kernel named 'nope'" in editor.messages[-1].message
