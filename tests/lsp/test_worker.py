"""The workers' threads: their calls' results and errors reach the event loop; they run at a lower CPU priority."""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import pytest

from cutune.lsp.worker import BACKGROUND_NICE, Worker


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


async def _in_worker() -> tuple[int, str]:
    worker = Worker("cutune-test")
    nice = await worker.run(_nice)
    with pytest.raises(ZeroDivisionError):
        await worker.run(lambda: 1 // 0)
    return nice, await worker.run(lambda: threading.current_thread().name)


@pytest.mark.skipif(sys.platform != "linux", reason="threads have their own CPU priority on Linux only")
def test_a_workers_thread_yields_the_cpu_to_the_event_loop() -> None:
    nice, name = asyncio.run(_in_worker())
    assert nice == min(_nice() + BACKGROUND_NICE, 19)
    assert name == "cutune-test"
    assert _nice() != nice  # the event loop's own thread keeps its priority
