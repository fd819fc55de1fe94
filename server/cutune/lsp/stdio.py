"""The server's stdin read by the event loop itself, not by a thread per read.

pygls reads stdin through its thread pool: three reads per message (the header, the blank line, the body), each
a hand-over to a pool thread and back. While an analysis runs Python in its own thread, every hand-over waits
for the GIL: on a 200,000-line file a request took 10 to 130 ms to reach its handler (measured 2026-11-25).
Read as an asyncio pipe, a message costs one wake-up of the event loop.
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
    """Whether the event loop can read `fd` itself: a pipe or a socket (as editors start servers). Not a
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
    server.protocol.set_writer(StdoutWriter(sys.stdout.buffer))
    try:
        await run_async(stop, reader, server.protocol, PYGLS_LOG, server.report_server_error)
    except asyncio.IncompleteReadError:  # stdin ended inside a message: the editor went away
        log.warning("stdin closed in the middle of a message")
