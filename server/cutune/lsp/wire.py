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
from typing import Any, ClassVar

from pygls.protocol import LanguageServerProtocol, default_converter

CONVERTER = default_converter()  # lsprotocol's values to JSON-ready data, as pygls converts them


class Serialized(str):
    """JSON text of a result or notification's parameters, sent without being converted again."""


class Protocol(LanguageServerProtocol):
    """pygls's protocol, writing `Serialized` results and parameters as they are."""

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
