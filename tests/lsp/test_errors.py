"""Protocol garbage from a client goes to the server's log, not to the user as "Error in server" pop-ups,
and the server keeps serving."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from lsprotocol import types

from tests.lsp.editor import Editor, copy_workspace

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def _still_serving(editor: Editor) -> None:
    """The server answers a real request afterwards, and has shown the user nothing."""
    uri = editor.open("scale.cu")
    lenses = await editor.lenses(uri)
    assert any(lens.command is not None and "scale_kernel" in str(lens.command.arguments) for lens in lenses)
    assert not [m.message for m in editor.messages]


async def _send_raw(editor: Editor, body: bytes) -> None:
    """Bytes on the wire with a correct header, whatever the body holds."""
    writer = editor.client.protocol.writer
    assert writer is not None
    written = writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    if inspect.isawaitable(written):
        await written


async def test_invalid_json_is_logged_not_shown(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("autotune", tmp_path))
    await _send_raw(editor, b'{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {')
    await _still_serving(editor)


async def test_a_notification_with_wrong_params_is_logged_not_shown(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("autotune", tmp_path))
    for method, params in ((types.TEXT_DOCUMENT_DID_OPEN, {"textDocument": {"uri": 42}}), ("$/cancelRequest", [])):
        await _send_raw(editor, json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode())
    await _still_serving(editor)


async def test_a_request_with_wrong_params_is_not_a_pop_up(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("autotune", tmp_path))
    request = {"jsonrpc": "2.0", "id": "bad-hover", "method": types.TEXT_DOCUMENT_HOVER, "params": {"position": 1}}
    await _send_raw(editor, json.dumps(request).encode())
    await _still_serving(editor)


async def test_a_change_to_a_document_never_opened_is_logged_not_shown(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("autotune", tmp_path))
    editor.client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=editor.uri("never_opened.cu"), version=3),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=4, character=0), end=types.Position(line=4, character=1)
                    ),
                    text="x",
                )
            ],
        )
    )
    await _still_serving(editor)
