"""The analysis process (lsp/host.py) seen from the server: calls whose answers arrive as asyncio futures, and a
process that dies started again.

The first process is forked from the server before it starts any thread; a restart starts a fresh interpreter
(`spawn`: forking a process that runs threads is unsafe). Calls are pickled over a pipe by a thread of their
own: a 200,000-line text is 6 MB, which the event loop would otherwise wait to write while the analysis process
reads it. Answers are read by another thread and handed to the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import queue
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from cutune.errors import CutuneError
from cutune.lsp.worker import Cancelled

log = logging.getLogger(__name__)

ANALYSIS, REQUESTS = "analysis", "requests"  # the analysis process's threads a call runs in
STOP, SKIP = "stop", "skip"  # messages without an answer: stop a document's work under way; skip a queued call
# an answer that is an error: the work was no longer wanted, the user's input was wrong, or a bug there
CANCELLED, REFUSED, FAILED = "cancelled", "refused", "failed"

# at most this many restarts within this many seconds: a text that kills the process each time is not retried forever
RESTARTS, RESTART_WINDOW_S = 3, 60.0


class HostLost(Cancelled):
    """The analysis process died before answering (it is started again, and the documents analysed again)."""


class HostFailed(Exception):
    """A bug in the analysis process (logged there, with its traceback)."""


def _serve(conn: Connection) -> None:
    """The analysis process's entry (a fresh interpreter imports the analysis code here)."""
    from cutune.lsp.host import serve

    serve(conn)


def _spawn() -> tuple[BaseProcess, Connection]:
    # forked while the server runs no other thread (at its start, on Linux): the child has the server's imports
    # already, where a fresh interpreter spends a second of CPU importing them again; later (a restart, with
    # threads running, which a fork would copy in whatever state they are) a fresh interpreter
    single = sys.platform == "linux" and threading.active_count() == 1
    context = multiprocessing.get_context("fork") if single else multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=_serve, args=(theirs,), name="cutune-analysis", daemon=True)
    process.start()
    theirs.close()
    return process, ours


_early: list[tuple[BaseProcess, Connection]] = []  # started by `start_early`, for the first AnalysisProcess


def start_early() -> None:
    """Start the server's first analysis process now, before the server starts any thread (`_spawn`)."""
    _early.append(_spawn())


class AnalysisProcess:
    """One analysis process at a time; `lost(message, restarted)` is called on the event loop when it dies (or
    cannot start), once the new one has started."""

    def __init__(self, lost: Callable[[str, bool], None]) -> None:
        self._lost = lost
        self._loop: asyncio.AbstractEventLoop | None = None
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._outbox: queue.SimpleQueue[tuple[Connection, Any] | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._deaths: list[float] = []
        self._closed = False

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start a process, or take the one `start_early` started; answers arrive on `loop`."""
        self._loop = loop
        try:
            process, ours = _early.pop() if _early else _spawn()
        except OSError as e:  # no processes left to this user, no semaphores (a sandbox): serve without analyses
            self._lost(f"cannot start the analysis process ({e}): no analyses until the server restarts", False)
            return
        self._process, self._conn = process, ours
        threading.Thread(target=self._read, args=(process, ours), name="cutune-host-reader", daemon=True).start()
        if self._writer is None:
            self._writer = threading.Thread(target=self._write, name="cutune-host-writer", daemon=True)
            self._writer.start()

    def call(self, lane: str, method: str, *args: Any) -> asyncio.Future[Any]:
        """Run `Host.<method>(*args)` (lsp/host.py) in one of its threads (ANALYSIS, REQUESTS). The future raises
        Cancelled when the work was no longer wanted (HostLost when the process died), CutuneError when it
        refused the user's input, HostFailed on a bug."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self._conn is None:
            future.set_exception(HostLost("the analysis process is not running"))
            return future
        ident = next(self._ids)
        self._pending[ident] = future
        self._outbox.put((self._conn, (ident, lane, method, args)))
        return future

    def stop(self, uri: str) -> None:
        """Stop the work on a document under way or queued (a newer version is coming)."""
        self._notify(STOP, uri)

    def skip(self, future: asyncio.Future[Any]) -> None:
        """Skip a call that has not begun; one under way runs to its end and its future gets its answer."""
        ident = next((i for i, f in self._pending.items() if f is future), None)
        if ident is not None:
            self._notify(SKIP, ident)

    def kill(self) -> None:
        """End the process at once (the server is exiting)."""
        self._closed = True
        if self._process is not None:
            with contextlib.suppress(OSError, ValueError):
                self._process.kill()
        self._outbox.put(None)

    def _notify(self, method: str, arg: Any) -> None:
        if self._conn is not None:
            self._outbox.put((self._conn, (0, "", method, (arg,))))

    def _write(self) -> None:
        while (item := self._outbox.get()) is not None:
            conn, message = item
            with contextlib.suppress(OSError, ValueError):  # a dead process: its reader reports it
                conn.send(message)

    def _read(self, process: BaseProcess, conn: Connection) -> None:
        loop = self._loop
        assert loop is not None
        while True:
            try:
                ident, ok, payload = conn.recv()
            except (EOFError, OSError):
                break
            with contextlib.suppress(RuntimeError):  # the loop closed: the server is exiting
                loop.call_soon_threadsafe(self._answer, ident, ok, payload)
        process.join(timeout=1.0)  # for its exit code
        conn.close()
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._died, process)

    def _answer(self, ident: int, ok: bool, payload: Any) -> None:
        future = self._pending.pop(ident, None)
        if future is None or future.done():
            return
        if ok:
            future.set_result(payload)
            return
        kind, text = payload
        errors = {CANCELLED: Cancelled, REFUSED: CutuneError}
        future.set_exception(errors.get(kind, HostFailed)(text))

    def _died(self, process: BaseProcess) -> None:
        if process is not self._process or self._closed:
            return
        ended = f"the analysis process ended (exit code {process.exitcode})"
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(HostLost(ended))
        now = time.monotonic()
        self._deaths = [t for t in self._deaths if now - t < RESTART_WINDOW_S] + [now]
        self._process = self._conn = None
        if len(self._deaths) > RESTARTS or self._loop is None:
            self._lost(f"{ended}, {len(self._deaths)} times in a minute: no analyses until the server restarts", False)
            return
        self.start(self._loop)
        if self._conn is not None:
            self._lost(f"{ended}; it was started again", True)
