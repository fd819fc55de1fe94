"""Settings: initialization options and workspace/configuration, invalid keys warned and defaulted."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types

from tests.lsp.conftest import REPLAY
from tests.lsp.editor import Editor

SETTINGS = {**REPLAY, "budget": {"trials": -3, "seconds": 60}, "logLevel": "loud", "agent": {"kind": "openai"}}
pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_invalid_initialization_options_are_named_and_defaulted(editor: Editor, recorded: Path) -> None:
    messages = [m for m in editor.client.messages if m.type == types.MessageType.Warning]
    assert messages[0].message == (
        "cutune: invalid setting(s) budget.trials, logLevel: using the defaults (see the cutune docs)"
    )
    assert "neither CUTUNE_LLM_API_KEY nor OPENAI_API_KEY is set" in messages[1].message
    editor.use(recorded)
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    job = await editor.command("cutune.autotune", uri, "scale_kernel")
    await editor.wait(lambda: editor.finished("scale_kernel") is not None)
    assert editor.finished("scale_kernel")["budget"] == 200  # type: ignore[index]  # the default
    assert job["job"] is not None


async def test_changed_settings_are_pulled_and_checked(editor: Editor, recorded: Path) -> None:
    editor.use(recorded)
    await editor.configure({**REPLAY, "backend": "gpu"})
    await editor.wait(lambda: bool(editor.messages))
    assert editor.messages[-1].message.startswith("cutune: invalid setting(s) backend:")
    await editor.configure({**REPLAY, "budget": {"trials": 5}})
    uri = editor.open("scale.cu")
    await editor.command("cutune.autotune", uri, "scale_kernel")
    await editor.wait(lambda: editor.finished("scale_kernel") is not None)
    assert editor.finished("scale_kernel")["done"] == 5  # type: ignore[index]
    assert len(editor.messages) == 1


async def test_settings_that_are_no_object_fall_back_to_defaults(editor: Editor) -> None:
    await editor.configure("fast please")
    await editor.wait(lambda: bool(editor.messages))
    assert editor.messages[-1].message.startswith("cutune: invalid setting(s) cutune:")
