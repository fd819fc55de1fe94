"""A daemon thread for the server's heavy work, awaited from the event loop.

Not asyncio's default executor: its threads are joined when the process ends, so an analysis of a
200,000-line file running at `exit` would keep the server alive for seconds; a daemon thread is not waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


class Cancelled(Exception):
    """Raised inside work that found it is no longer wanted (a newer edit, the server exiting)."""


class Worker:
    """One daemon thread running submitted calls in order; each call's result arrives as an asyncio future."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], asyncio.AbstractEventLoop, asyncio.Future[Any]]]
        self._queue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._running: asyncio.Future[Any] | None = None  # the future of the call under way

    def run(self, work: Callable[[], _T]) -> asyncio.Future[_T]:
        """Queue `work`; cancelling the future before it starts skips it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            self._thread.start()
        self._queue.put((work, loop, future))
        return future

    def skip(self, future: asyncio.Future[Any]) -> None:
        """Cancel a call that has not begun; one under way runs to its end and its future gets its result."""
        if future is not self._running:
            future.cancel()

    def _serve(self) -> None:
        background()
        while True:
            work, loop, future = self._queue.get()
            self._running = future
            if future.cancelled():  # replaced before it began
                continue
            try:
                result = work()
            except BaseException as e:  # handed to the awaiting request, which decides
                _deliver(loop, future, None, e)
            else:
                _deliver(loop, future, result, None)


BACKGROUND_NICE = 10  # how much lower than the event loop's thread the workers' CPU priority is


def background() -> None:
    """Lower the calling thread's CPU priority (Linux gives each thread its own nice value), so that on a busy
    machine the event loop and the editor get the cores before an analysis does: at 200,000 lines the editor's
    own decoding of the lenses waited for the CPU more than it ran. Where threads have no priority of their
    own, nothing changes."""
    if sys.platform != "linux":  # elsewhere, setpriority with a thread's id is refused or means a process
        return
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)


def _deliver(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], result: Any, error: BaseException | None
) -> None:
    def settle() -> None:
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    with contextlib.suppress(RuntimeError):  # the loop closed: the server is exiting and nobody waits
        loop.call_soon_threadsafe(settle)
