"""Autotune jobs in the background: one at a time on the GPU, one per kernel, cancellable, reporting status."""

from __future__ import annotations

import enum
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from cutune.agent.steps import LoopOptions
from cutune.errors import CutuneError
from cutune.gpu.backend import TimingOptions
from cutune.lsp import describe
from cutune.lsp.settings import Settings
from cutune.project import KernelContext, workspace_dir
from cutune.tune import Progress, ProgressFn, TuneResult
from cutune.workflow import AgentRequest, BackendChoice, Hooks, TuneRequest, agent_autotune, autotune

log = logging.getLogger(__name__)

JOB_STATUS = "cutune/jobStatus"  # the notification of every status change
_REPORT_EVERY_S = 0.1  # progress notifications at most this often: replayed trials take microseconds

Work = Callable[[ProgressFn, threading.Event], TuneResult]


class JobState(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class JobStatus:
    """Where a job stands: the body of a `cutune/jobStatus` notification."""

    uri: str
    kernel: str
    state: JobState
    done: int = 0
    budget: int = 0
    best: float | None = None  # best speedup so far (original time / best time)
    message: str = ""

    @property
    def finished(self) -> bool:
        return self.state in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)

    def to_json(self) -> dict[str, Any]:
        """The notification's JSON."""
        return {
            "uri": self.uri,
            "kernel": self.kernel,
            "state": self.state.value,
            "done": self.done,
            "budget": self.budget,
            "best": self.best,
            "message": self.message,
        }


@dataclass
class TuneJob:
    """One autotune job; `status` is replaced (never mutated) so that other threads read whole snapshots."""

    id: str
    status: JobStatus
    cancel: threading.Event = field(default_factory=threading.Event)


class JobRefused(CutuneError):
    """A job for this kernel is already queued or running."""


class Jobs:
    """Runs jobs one after another in a worker thread; `notify` gets every status change, from that thread."""

    def __init__(self, notify: Callable[[TuneJob], None]) -> None:
        self._notify = notify
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cutune-tune")
        self._active: dict[tuple[str, str], TuneJob] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def active(self, uri: str, kernel: str) -> TuneJob | None:
        """The queued or running job of a kernel."""
        with self._lock:
            return self._active.get((uri, kernel))

    def kernels(self, uri: str) -> frozenset[str]:
        """The kernels of a document with a queued or running job."""
        with self._lock:
            return frozenset(k for u, k in self._active if u == uri)

    def reserve(self, uri: str, kernel: str, budget: int) -> TuneJob:
        """A queued job for a kernel; raises JobRefused when it has one already."""
        with self._lock:
            if (uri, kernel) in self._active:
                raise JobRefused(f"{kernel} is already being tuned; cancel that job first")
            job = TuneJob(f"cutune-job-{next(self._ids)}", JobStatus(uri, kernel, JobState.QUEUED, budget=budget))
            self._active[(uri, kernel)] = job
        self._notify(job)
        return job

    def start(self, job: TuneJob, prepare: Callable[[], Work]) -> None:
        """Prepare and run the job in the worker thread (`prepare` may be slow: it opens backends)."""
        self._executor.submit(self._run, job, prepare)

    def cancel(self, uri: str, kernel: str) -> bool:
        """Ask the kernel's job to stop after its current trial."""
        job = self.active(uri, kernel)
        if job is not None:
            job.cancel.set()
        return job is not None

    def shutdown(self) -> None:
        """Cancel every job and stop the worker."""
        with self._lock:
            jobs = list(self._active.values())
        for job in jobs:
            job.cancel.set()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _run(self, job: TuneJob, prepare: Callable[[], Work]) -> None:
        self._update(job, state=JobState.RUNNING, message="preparing…")
        last = 0.0

        def progress(p: Progress) -> None:
            nonlocal last
            best = None if not p.best else 1.0 / p.best
            job.status = replace(
                job.status, done=p.done, budget=p.budget, best=best, message=_progress_message(p, best)
            )
            if time.monotonic() - last >= _REPORT_EVERY_S:
                last = time.monotonic()
                self._notify(job)

        try:
            result = prepare()(progress, job.cancel)
        except CutuneError as e:
            self._finish(job, state=JobState.FAILED, message=str(e))
        except Exception as e:  # a bug must not take the server down: report it and go on
            log.exception("autotune of %s failed", job.status.kernel)
            self._finish(job, state=JobState.FAILED, message=f"internal error: {type(e).__name__}: {e}")
        else:
            self._finish(job, **_outcome(result, cancelled=job.cancel.is_set()))

    def _update(self, job: TuneJob, **changes: Any) -> None:
        job.status = replace(job.status, **changes)
        self._notify(job)

    def _finish(self, job: TuneJob, **changes: Any) -> None:
        with self._lock:
            self._active.pop((job.status.uri, job.status.kernel), None)
        self._update(job, **changes)


def _outcome(result: TuneResult, *, cancelled: bool) -> dict[str, Any]:
    """The final status of a job that ran to its end, or stopped when cancelled."""
    if cancelled:
        return {"state": JobState.CANCELLED, "message": "cancelled: finished trials are kept, autotune again to resume"}
    best = result.speedup if result.significant else 1.0
    return {"state": JobState.DONE, "best": best, "message": describe.gain(result)}


def _progress_message(p: Progress, best: float | None) -> str:
    text = f"{p.done}/{p.budget} trials" if p.phase == "search" else f"{p.phase} · {p.done} trials"
    if p.failures:
        text += f" · {p.failures} failed"
    return text + (f" · best {best:.2f}×" if best else "")


def tuning_work(ctx: KernelContext, settings: Settings) -> Work:
    """What an autotune job runs: the workflow's autotune with the backend the settings name (or the agent)."""
    if settings.agent.autotune:
        return agent_work(ctx, settings)
    request = TuneRequest(
        trials=settings.budget.trials,
        seconds=settings.budget.seconds,
        storage_url=settings.storage_url or None,
        variants=None if settings.variants else False,
        backend=_backend(ctx, settings),
        timing=TimingOptions(mode=settings.timing),
    )
    return lambda progress, cancel: autotune(ctx, request, Hooks(progress, cancel)).result


def agent_work(ctx: KernelContext, settings: Settings) -> Work:
    """The measured agent loop (`agent.autotune`): variants proposed, checked, tuned briefly; its best result."""
    agent = settings.agent
    loop = LoopOptions(
        max_steps=agent.max_iterations,
        seconds=settings.budget.seconds,
        target_pct=agent.target_pct,
        trials=agent.step_trials,
        arch=settings.arch,
    )
    request = AgentRequest(agent, loop, settings.storage_url or None, _backend(ctx, settings))

    def work(progress: ProgressFn, cancel: threading.Event) -> TuneResult:
        run = agent_autotune(ctx, request, Hooks(progress, cancel))
        if run.result is None:
            raise CutuneError(f"the agent measured nothing of {ctx.kernel.name}: {run.message}")
        return run.result

    return work


def _backend(ctx: KernelContext, settings: Settings) -> BackendChoice:
    recording = workspace_dir(ctx.path) / settings.replay_file if settings.replay_file else None
    hint = "the `cutune.replayFile` setting"
    return BackendChoice(settings.backend, recording, settings.replay_pace, recording_hint=hint)
