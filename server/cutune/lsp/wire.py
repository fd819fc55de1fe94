"""Large answers serialised to JSON once, in a worker thread, and sent as they are.

pygls turns each answer into JSON on the event loop, through cattrs: the lenses and diagnostics of a
20,000-line file took about 90 ms each time (a 200,000-line file's, about a second), and requests waited
meanwhile. A `Serialized` answer is made once per analysis, off the event loop, and costs only its write (the
lenses and diagnostics write their JSON themselves: lsp/lenses.py, lsp/diagnostics.py).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Generator
from typing import Any, ClassVar

from lsprotocol import types
from pygls.protocol import LanguageServerProtocol, default_converter
from pygls.protocol.language_server import lsp_method

from cutune.lsp.document import DocumentWorkspace

CONVERTER = default_converter()  # lsprotocol's values to JSON-ready data, as pygls converts them


class Serialized(str):
    """JSON text of a result or notification's parameters, sent without being converted again."""


class Protocol(LanguageServerProtocol):
    """pygls's protocol, writing `Serialized` results and parameters as they are, holding documents whose edits are
    applied in time proportional to the edit (lsp/document.py), and shutting down while requests are pending."""

    _writing: ClassVar[set[asyncio.Future[Any]]] = set()  # writes under way (on an asynchronous transport)

    def _send_data(self, data: Any) -> None:
        response = hasattr(data, "result") and hasattr(data, "id")
        raw = data.result if response else getattr(data, "params", None)
        if not isinstance(raw, Serialized) or self.writer is None:
            super()._send_data(data)
            return
        head = {"jsonrpc": "2.0", "id": data.id} if response else {"jsonrpc": "2.0", "method": data.method}
        body = f'{json.dumps(head)[:-1]},"{"result" if response else "params"}":{raw}}}'.encode()
        written = self.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        if inspect.isawaitable(written):
            task = asyncio.ensure_future(written)
            self._writing.add(task)
            task.add_done_callback(self._writing.discard)

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, types.InitializeResult]:
        """pygls's `initialize`, then its workspace (no document is open yet) as a `DocumentWorkspace`."""
        result = yield from super().lsp_initialize(params)
        made = self.workspace
        self._workspace = DocumentWorkspace(
            made.root_uri, made._sync_kind, list(made.folders.values()), made.position_encoding
        )
        return result

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        """pygls's `shutdown`, once the other pending requests are cancelled: pygls cancels them while iterating
        over its dict of them, from which a cancelled command removes itself at once (RuntimeError, and a
        traceback on stderr). Read from stdin by the event loop (lsp/stdio.py), a `shutdown` sent right behind
        commands finds them still pending."""
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != self.msg_id and not future.done():
                future.cancel()
        yield from super().lsp_shutdown(*args)
