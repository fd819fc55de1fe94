"""Apply: the tuned configuration written into the source as one workspace edit; stale results refuse."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lsprotocol import types

from tests.lsp.editor import Editor
from tests.lsp.synthetic import REPLAYED

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def _lens(editor: Editor, uri: str) -> tuple[str, str]:
    command = (await editor.lenses(uri))[0].command
    assert command is not None
    return command.title, command.command


async def test_apply_writes_the_tuned_values(editor: Editor, tuned: Path) -> None:
    editor.use(tuned)
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    seen = editor.publications(uri)
    assert await editor.command("cutune.apply", uri, "scale_kernel") == {"applied": True}
    assert len(editor.applied) == 1
    text = editor.text(uri)
    assert "BLOCK_THREADS = 256;" in text and "ITEMS_PER_THREAD = 2;" in text
    await editor.diagnostics(uri, since=seen)
    title, command = await _lens(editor, uri)
    assert re.fullmatch(rf"⚡ 1\.35× faster · 45% of speed-of-light · {REPLAYED} · applied ✓", title)
    assert command == "cutune.showResults"


async def test_editing_the_kernel_makes_the_result_stale(editor: Editor, tuned: Path) -> None:
    editor.use(tuned)
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    seen = editor.publications(uri)
    editor.change(uri, editor.text(uri).replace("out[i] = a * in[i];", "out[i] = a * in[i] + 1.0f;"))
    stale = [d for d in await editor.diagnostics(uri, since=seen) if d.code == "stale-result"]
    assert len(stale) == 1 and stale[0].message.startswith("stale: the source changed since this was tuned")
    title, command = await _lens(editor, uri)
    assert title.startswith("⚠ stale result (1.35× faster") and command == "cutune.autotune"
    assert await editor.command("cutune.apply", uri, "scale_kernel") == {"applied": False}
    assert editor.applied == []
    assert editor.messages[-1].type == types.MessageType.Warning
    assert "stale" in editor.messages[-1].message


async def test_apply_without_a_result_is_a_message(editor: Editor, recorded: Path) -> None:
    editor.use(recorded)
    uri = editor.open("scale.cu")
    assert await editor.command("cutune.apply", uri, "scale_kernel") == {"applied": False}
    assert (
        editor.messages[-1].message
        == "cutune: cannot apply to scale_kernel: it has no stored result: autotune it first"
    )


async def test_show_results_is_markdown(editor: Editor, tuned: Path) -> None:
    editor.use(tuned)
    uri = editor.open("scale.cu")
    markdown = (await editor.command("cutune.showResults", uri, ""))["markdown"]
    assert re.match(rf"### scale_kernel {REPLAYED} \(sm_90\)", markdown)
    assert "| n=1048576 | " in markdown and "| n=16777216 | " in markdown
