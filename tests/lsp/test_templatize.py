"""The Templatize command: one workspace edit (applied by the editor) rewrites the kernel and drafts its spec."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.editor import Editor, copy_workspace


async def test_templatize_applies_the_rewrite_and_drafts_the_spec(client: LanguageClient, tmp_path: Path) -> None:
    editor = Editor(client, copy_workspace("lenses", tmp_path))
    await editor.start()
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    reply = await editor.command("cutune.templatize", uri, "scale_kernel")
    assert reply == {"applied": True, "params": ["BLOCK_THREADS", "ITEMS_PER_THREAD", "FAST_MATH", "MAXRREGCOUNT"]}
    assert len(editor.applied) == 1 and editor.applied[0].label is not None
    assert "struct scale_kernel_tuning {" in editor.text(uri)
    spec = (editor.root / "scale.tune.toml").read_text()
    assert spec.startswith("[kernel.scale_kernel]\n")
    await editor.wait(lambda: any(d.code == "spec-invalid" for d in editor.published.get(uri, [[]])[-1]))
    titles = [lens.command.title for lens in await editor.lenses(uri) if lens.command and lens.range.start.line == 9]
    assert titles == ["Autotune"]  # templatized: no more Templatize lens
    in_spec = await editor.diagnostics(editor.uri("scale.tune.toml"))
    assert [(d.range.start.line, d.message) for d in in_spec] == [
        (2, "fill in the TODO placeholders first: kernel.scale_kernel.grid, kernel.scale_kernel.block")]


async def test_templatize_twice_changes_nothing(client: LanguageClient, tmp_path: Path) -> None:
    editor = Editor(client, copy_workspace("autotune", tmp_path))
    await editor.start()
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    reply = await editor.command("cutune.templatize", uri, "scale_kernel")
    assert reply == {"applied": False, "params": ["BLOCK_THREADS", "ITEMS_PER_THREAD", "FAST_MATH", "MAXRREGCOUNT"]}
    assert editor.applied == []
    assert client.messages[-1].type == types.MessageType.Info


async def test_a_declined_edit_reports_not_applied(client: LanguageClient, tmp_path: Path) -> None:
    editor = Editor(client, copy_workspace("lenses", tmp_path))
    editor.accept_edits = False
    await editor.start()
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    assert (await editor.command("cutune.templatize", uri, "add_kernel"))["applied"] is False
    assert not (editor.root / "scale.tune.toml").exists()


async def test_an_unknown_kernel_is_a_message(client: LanguageClient, tmp_path: Path) -> None:
    editor = Editor(client, copy_workspace("lenses", tmp_path))
    await editor.start()
    uri = editor.open("scale.cu")
    assert await editor.command("cutune.templatize", uri, "nope") == {"applied": False, "params": []}
    assert client.messages[-1].type == types.MessageType.Warning
    assert "no __global__ kernel named 'nope'" in client.messages[-1].message
