"""Several workers on one study: one per GPU of this host (`tune_on_devices`), or from any host (`join`).

Every worker runs the ordinary search loop on the shared study (claims, budget and retries are the
study's: see cutune.tune.search and cutune.tune.liveness). On one host, the first GPU's worker is the
lead: it runs `tune` (it opens the study, states the plan, searches, then re-measures the finalists on
its own GPU and stores the result); the others join the study it names. Each worker is a process of its
own that sees one GPU only (CUDA_VISIBLE_DEVICES), so their measurements never share a device.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from multiprocessing.sharedctypes import Synchronized
from typing import Any

from cutune.errors import CutuneError, StudyError
from cutune.gpu.backend import Backend, DeviceInfo, Job
from cutune.tune.liveness import worker_name
from cutune.tune.options import TuneOptions
from cutune.tune.plan import read_plan, to_json
from cutune.tune.result import TuneResult
from cutune.tune.run import limits_of, tune
from cutune.tune.search import Progress, ProgressFn, SearchOutcome, run_search
from cutune.tune.space import Feasibility
from cutune.tune.study import load_study

_JOIN_S = 60.0  # how long a finished run waits for its workers to exit before stopping them
_POLL_S = 0.2


@dataclass(frozen=True)
class BackendRef:
    """How a worker process builds its backend: a registry name and its options (picklable)."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    record: str | None = None  # a recording of every measurement this worker makes
    isolate: bool | None = None  # measure in a worker process; None: where the backend needs one

    def build(self, device: int | None = None) -> Backend:
        """The backend; with several workers, each records to its own file (`name.gpuN.jsonl`)."""
        from cutune.gpu.registry import create_backend

        record = self.record
        if record is not None and device is not None:
            stem, dot, ext = record.rpartition(".")
            record = f"{stem}.gpu{device}.{ext}" if dot else f"{record}.gpu{device}"
        return create_backend(self.name, isolate=self.isolate, record=record, **self.options)


def join(
    url: str,
    study_name: str | None,
    backend: Backend,
    *,
    worker: str = "",
    queue_start: float = 0.0,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    opened: tuple[Job, DeviceInfo] | None = None,
) -> SearchOutcome:
    """Search a study that `cutune tune` started, with what its plan says; refuses a different GPU.

    `opened` is the job the backend was already opened with, and its device: kept when the plan's job is
    that job, so a worker can open (compile, measure the floor, build the reference) while the lead does.
    """
    try:
        study = load_study(url, study_name)
        plan = read_plan(study)
        if opened is not None and to_json(opened[0]) == to_json(plan.job):
            device = opened[1]
        else:
            if opened is not None:
                backend.close()
            device = backend.open(plan.job)
    except BaseException:
        backend.close()
        raise
    try:
        refusal = plan.refusal(device)
        if refusal is not None:
            raise StudyError(f"not joining study {study.study_name}: {refusal}")
        check = Feasibility(plan.job.space, plan.job.spec, limits_of(device))
        return run_search(
            study,
            backend,
            check,
            check.listed(),
            plan.budget,
            plan.search,
            progress=progress,
            cancel=cancel,
            liveness=plan.liveness,
            worker=worker,
            queue_start=queue_start,
        )
    finally:
        backend.close()


def tune_on_devices(
    job: Job,
    backend: BackendRef,
    devices: Sequence[int],
    options: TuneOptions,
    *,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    notice: Callable[[str], None] | None = None,
) -> TuneResult:
    """Tune with one worker per device on one study; the finalists are re-measured on `devices[0]`.

    `progress` sees the study's progress after every measurement of any worker; `notice` hears of a
    worker that stopped early (e.g. its GPU differs from the lead's), while the others go on.
    """
    if not devices:
        raise StudyError("no devices to tune on")
    ctx = multiprocessing.get_context("spawn")
    messages: Queue[tuple[Any, ...]] = ctx.Queue()
    inboxes: list[Queue[str]] = [ctx.Queue() for _ in devices]
    # a lock-free shared flag: an Event's set() waits for every waiter to wake, and hangs on a dead one
    stop = _Flag(ctx.Value("b", 0, lock=False))
    procs = [
        ctx.Process(
            target=_device_worker,
            args=(i, len(devices), device, job, backend, options, messages, inboxes[i], stop),
            name=f"cutune-gpu{device}",
        )
        for i, device in enumerate(devices)
    ]
    for proc in procs:
        proc.start()
    try:
        return _collect(procs, devices, messages, inboxes, stop, progress, cancel, notice or (lambda _: None))
    except BaseException:
        stop.set()  # the lead failed, or the caller stops: the others end after their current trial
        raise
    finally:
        _finish(procs, stop)


def _collect(
    procs: Sequence[BaseProcess],
    devices: Sequence[int],
    messages: Queue[tuple[Any, ...]],
    inboxes: list[Queue[str]],
    stop: _Flag,
    progress: ProgressFn | None,
    cancel: threading.Event | None,
    notice: Callable[[str], None],
) -> TuneResult:
    """Relay the study's name to the workers and their progress to the caller, until the lead's result."""
    done = -1
    while True:
        if cancel is not None and cancel.is_set():
            stop.set()
        try:
            message = messages.get(timeout=_POLL_S)
        except queue.Empty:
            if not procs[0].is_alive() and messages.empty():
                raise StudyError(
                    f"the worker of GPU {devices[0]} exited (code {procs[0].exitcode}) without a result"
                ) from None
            continue
        kind, index = message[0], message[1]
        if kind == "study":
            for inbox in inboxes[1:]:
                inbox.put(message[2])
        elif kind == "progress" and progress is not None and message[2].done >= done:
            done = message[2].done
            progress(message[2])
        elif kind == "result":
            result: TuneResult = message[2]
            return result
        elif kind == "error":
            if index == 0:
                raise StudyError(f"GPU {devices[0]}: {message[2]}")
            notice(f"the worker of GPU {devices[index]} stopped: {message[2]}")


def _finish(procs: Sequence[BaseProcess], stop: _Flag) -> None:
    """Let the workers finish their search (it ends with the lead's); stop any that do not."""
    for proc in procs:
        proc.join(_JOIN_S)
        if proc.is_alive():
            stop.set()
            proc.join(_JOIN_S)
        if proc.is_alive():
            proc.kill()
            proc.join()


def _device_worker(
    index: int,
    count: int,
    device: int,
    job: Job,
    ref: BackendRef,
    options: TuneOptions,
    messages: Queue[tuple[Any, ...]],
    inbox: Queue[str],
    stop: _Flag,
) -> None:
    """One GPU's worker process: the lead tunes, the others join the study the lead names."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which sets `stop`
    see_only(device)
    cancel = threading.Event()

    def relay_stop() -> None:
        while not stop.is_set():
            time.sleep(_POLL_S)
        cancel.set()

    threading.Thread(target=relay_stop, daemon=True).start()

    def report(p: Progress) -> None:
        messages.put(("progress", index, p))

    try:
        backend = ref.build(device if count > 1 else None)
        name = worker_name(device)
        if index == 0:
            result = tune(
                job,
                backend,
                options,
                progress=report,
                cancel=cancel,
                worker=name,
                opened=lambda study: messages.put(("study", index, study)),
            )
            messages.put(("result", index, result))
            return
        # opened before the study is named, so this worker starts measuring as soon as the lead does
        device_info = backend.open(job)
        study = _study_name(inbox, stop)
        if study is None:
            backend.close()
        else:
            join(
                options.storage(),
                study,
                backend,
                worker=name,
                queue_start=index / count,
                progress=report,
                cancel=cancel,
                opened=(job, device_info),
            )
    except CutuneError as e:
        messages.put(("error", index, str(e)))
    except Exception as e:  # a bug: said, not shown as a traceback of a child process
        messages.put(("error", index, f"{type(e).__name__}: {e}"))


def _study_name(inbox: Queue[str], stop: _Flag) -> str | None:
    """The lead's study, once it is open (None when the run stops first)."""
    while not stop.is_set():
        with contextlib.suppress(queue.Empty):
            return inbox.get(timeout=_POLL_S)
    return None


@dataclass(frozen=True)
class _Flag:
    """A stop flag shared with the worker processes."""

    value: Synchronized[int]

    def set(self) -> None:
        self.value.value = 1

    def is_set(self) -> bool:
        return bool(self.value.value)


def see_only(device: int) -> None:
    """Make CUDA in this process (and its children) see only `device`, counted as the parent counts."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ordinals = [d.strip() for d in visible.split(",")] if visible else []
    os.environ["CUDA_VISIBLE_DEVICES"] = ordinals[device] if device < len(ordinals) else str(device)


def parse_devices(text: str, count: Callable[[], int]) -> tuple[int, ...]:
    """`0,1,3` or `all` (every device `count()` reports) as device ordinals."""
    if text.strip() == "all":
        n = count()
        if n < 1:
            raise StudyError("--devices all: no CUDA device here")
        return tuple(range(n))
    try:
        devices = tuple(int(d) for d in text.split(",") if d.strip())
    except ValueError:
        raise StudyError(f"--devices takes ordinals such as 0,1 or `all`, not {text!r}") from None
    if not devices or len(set(devices)) != len(devices) or min(devices) < 0:
        raise StudyError(f"--devices needs distinct ordinals ≥ 0, not {text!r}")
    return devices
