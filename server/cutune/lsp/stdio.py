"""The server's stdin read, and its stdout written, by the event loop itself.

pygls reads stdin through its thread pool: three reads per message (the header, the blank line, the body), each
a hand-over to a pool thread and back. While an analysis runs Python in its own thread, every hand-over waits
for the GIL: on a 200,000-line file a request took 10 to 130 ms to reach its handler (measured 2026-11-25).
Read as an asyncio pipe, a message costs one wake-up of the event loop.

pygls writes stdout with a blocking write: a 200,000-line file's diagnostics (5 MB) held the event loop until the
editor had read all but the pipe's last megabyte, 50 to 130 ms while the editor was busy decoding lenses
(measured 2026-11-28). Written through an asyncio pipe, they go out as the editor reads them, and requests are
read and answered meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import sys
import threading
from typing import TYPE_CHECKING

from pygls.io_ import StdoutWriter, run_async

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)
PYGLS_LOG = logging.getLogger("pygls.server")  # what pygls's own stdin loop logs to

HEADER_LIMIT = 1 << 16  # the longest header line read (a Content-Length line is ~25 bytes)


def readable_as_pipe(fd: int) -> bool:
    """Whether the event loop can read or write `fd` itself: a pipe or a socket (as editors start servers). Not a
    terminal: its stdin and stdout share one file description, and reading it without blocking would make the
    writes of large answers fail."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


PIPE_BYTES = 1 << 20  # the most an unprivileged process may ask for, by default (/proc/sys/fs/pipe-max-size)


def widen_pipe(fd: int) -> None:
    """Let the pipe to the editor hold 1 MB instead of 64 KB (Linux): a 200,000-line file's lenses (6 MB) cross
    it in 6 hand-overs between the server's writes and the editor's reads instead of 90, and on a busy machine
    each waits for both processes to be scheduled. Elsewhere, or refused, the pipe stays as it is."""
    if sys.platform != "linux" or not stat.S_ISFIFO(os.fstat(fd).st_mode):
        return
    import fcntl  # Unix only

    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)


def serve_stdio(server: LanguageServer) -> None:
    """Serve LSP on stdin and stdout until `exit` or the end of stdin."""
    if not readable_as_pipe(sys.stdin.fileno()):
        server.start_io()
        return
    try:
        asyncio.run(_serve(server, threading.Event()))
    except (KeyboardInterrupt, SystemExit, BrokenPipeError):  # `exit`, Ctrl-C, or the editor went away
        pass
    finally:
        server.shutdown()


async def _serve(server: LanguageServer, stop: threading.Event) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=HEADER_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    widen_pipe(sys.stdout.fileno())
    server.protocol.set_writer(await stdout_writer())
    try:
        await run_async(stop, reader, server.protocol, PYGLS_LOG, server.report_server_error)
    except asyncio.IncompleteReadError:  # stdin ended inside a message: the editor went away
        log.warning("stdin closed in the middle of a message")


class PipeWriter:
    """stdout as an asyncio pipe: `write` hands the bytes to the event loop, which writes them as the editor reads."""

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self._transport = transport

    def write(self, data: bytes) -> None:
        """Queue `data` (in order) for the editor; nothing once the pipe is closed (the editor went away)."""
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        """Close at `exit`: what is still queued is dropped (the editor had `shutdown`'s answer before sending
        `exit`, and stops reading)."""
        self._transport.close()


async def stdout_writer() -> PipeWriter | StdoutWriter:
    """stdout as a PipeWriter when it is a pipe or a socket of its own; else pygls's blocking writer (a terminal,
    a file, or a pipe that stderr shares: writing it without blocking would make stderr's writes fail when full)."""
    out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
    if not readable_as_pipe(sys.stdout.fileno()) or (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino):
        return StdoutWriter(sys.stdout.buffer)
    sys.stdout.flush()
    transport, _ = await asyncio.get_running_loop().connect_write_pipe(asyncio.Protocol, sys.stdout.buffer)
    return PipeWriter(transport)
