"""Results live in the workspace's `.cutune/`: a restarted server shows them, stale or not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lsp.conftest import REPLAY, SERVER
from tests.lsp.editor import Editor

SETTINGS = REPLAY
pytestmark = pytest.mark.asyncio(loop_scope="module")


async def _first_lens(editor: Editor, uri: str) -> str:
    command = (await editor.lenses(uri))[0].command
    assert command is not None
    return command.title


async def test_a_result_tuned_in_one_server_shows_in_the_next(editor: Editor, recorded: Path) -> None:
    editor.use(recorded)
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    await editor.command("cutune.autotune", uri, "scale_kernel")
    await editor.wait(lambda: (editor.finished("scale_kernel") or {}).get("state") == "done")
    (recorded / "scale.cu").write_text(editor.text(uri).replace("a * in[i]", "in[i] * a"))  # edited while closed

    restarted = Editor(await SERVER.start())
    try:
        await restarted.start(REPLAY)
        restarted.use(recorded)
        uri = restarted.open("scale.cu")
        assert (await _first_lens(restarted, uri)).startswith("⚡ 1.35× faster")  # before the analysis: read as is
        stale = [d for d in await restarted.diagnostics(uri) if d.code == "stale-result"]
        assert len(stale) == 1
        assert (await _first_lens(restarted, uri)).startswith("⚠ stale result (1.35× faster")
    finally:
        await restarted.client.shutdown_session()
        await restarted.client.stop()
