"""Isolation: a child process owns the measuring backend, so a fault, crash or hang costs one trial.

The child is started with the `spawn` method (CUDA must not be forked) and speaks over a pipe: the
parent sends the job, configurations and prefetch hints; the child answers each open and evaluate.
When the child faults (its CUDA context is then dead, so it exits after answering), dies or does not
answer within the trial timeout (it is killed), the trial fails with FAULT, CRASH or TIMEOUT and the
next evaluation starts a fresh child, which reopens the job with a new seed: a fresh reference.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

from cutune.errors import CutuneError
from cutune.gpu.backend import (
    RAGGED_ATTEMPTS,
    Backend,
    Capability,
    Check,
    DeviceInfo,
    Failure,
    Job,
    Measurement,
    RaggedSizeFailed,
)
from cutune.template.model import Config

if TYPE_CHECKING:
    from cutune.gpu.profile import Profile

log = logging.getLogger(__name__)
_UNHEALTHY_EXIT = 3
SANITIZE_TIMEOUT_S = 600.0  # compute-sanitizer runs a fresh process and slows kernels down many times


class IsolatedBackend(Backend):
    """Runs another backend (a registry name or a `module:Class` path) in a replaceable child process."""

    name = "isolated"

    def __init__(
        self, backend: str, *, options: Mapping[str, Any] | None = None, start_timeout_s: float = 600.0
    ) -> None:
        self.backend = backend
        self.options = dict(options or {})
        self.start_timeout_s = start_timeout_s  # CUDA start-up, speed of light and the reference
        self.restarts = 0  # children replaced after a fault, crash or hang
        self._job: Job | None = None
        self._info: DeviceInfo | None = None
        self._proc: BaseProcess | None = None
        self._conn: Connection | None = None

    def open(self, job: Job) -> DeviceInfo:
        """Start a child and open the job there."""
        self.close()
        self._job = job
        self.restarts = 0
        return self._start()

    def evaluate(self, config: Config, at: Sequence[int] | None = None) -> Measurement:
        """Evaluate in the child; a fault, death or timeout becomes a failed measurement."""
        job = self._require_job()
        if self._conn is None:
            self._start()
        conn = self._conn
        assert conn is not None
        timeout = job.timing.trial_timeout_s
        try:
            conn.send(("evaluate", config, at))
            if not conn.poll(timeout):
                self._kill()
                return Measurement(
                    config,
                    failure=Failure.TIMEOUT,
                    detail=f"no result within {timeout:g} s; the worker was replaced",
                )
            reply = conn.recv()
        except (EOFError, OSError):
            return Measurement(config, failure=Failure.CRASH, detail=self._death())
        if reply[0] == "measurement":
            _, measurement, healthy = reply
            if not healthy:
                self._reap()
            return measurement
        log.warning("the %s worker failed on %s:\n%s", self.backend, config, reply[2])
        self._kill()
        return Measurement(config, failure=Failure.CRASH, detail=f"the worker failed: {reply[1]}")

    def verify(self, config: Config, seed: int) -> Check | None:
        """Re-check in the child on fresh inputs; a fault, death or timeout fails the check."""
        job = self._require_job()
        return self._ask_check(("verify", config, seed), config, job.timing.trial_timeout_s * 2)

    def sanitize(self, configs: Sequence[Config]) -> tuple[Check, ...] | None:
        """Run compute-sanitizer from the child (which starts it in a fresh process of its own)."""
        return self._ask(("sanitize", tuple(configs)), configs, SANITIZE_TIMEOUT_S)

    def can(self, capability: Capability) -> bool:
        """What the backend run in the child declares."""
        return capability in self._inner_class().capabilities

    def profile(self, job: Job, config: Config) -> Profile | None:
        """The child's backend's profile: its launcher runs in a process of ncu's, never in this one."""
        return self._inner_class()(**self.options).profile(job, config)

    def _inner_class(self) -> type[Backend]:
        from cutune.gpu.registry import resolve_backend  # the registry imports this module

        return resolve_backend(self.backend)

    def _ask_check(self, message: tuple[Any, ...], config: Config, timeout: float) -> Check | None:
        checks = self._ask(message, (config,), timeout)
        return checks if checks is None or isinstance(checks, Check) else checks[0]

    def _ask(self, message: tuple[Any, ...], configs: Sequence[Config], timeout: float) -> Any:
        """Send a check request; a fault, death or timeout fails every configuration it names."""
        if self._conn is None:
            self._start()
        conn = self._conn
        assert conn is not None
        try:
            conn.send(message)
            if not conn.poll(timeout):
                self._kill()
                why = f"no answer within {timeout:g} s; the worker was replaced"
                return tuple(Check(c, Failure.TIMEOUT, why) for c in configs)
            reply = conn.recv()
        except (EOFError, OSError):
            death = self._death()
            return tuple(Check(c, Failure.CRASH, death) for c in configs)
        if reply[0] == "check":
            _, check, healthy = reply
            if not healthy:
                self._reap()
            return check
        log.warning("the %s worker failed on %s:\n%s", self.backend, list(configs), reply[2])
        self._kill()
        return tuple(Check(c, Failure.CRASH, f"the worker failed: {reply[1]}") for c in configs)

    def prefetch(self, configs: Sequence[Config]) -> None:
        """Pass the hint on to the child (no answer is awaited)."""
        if self._conn is not None:
            # A dead child is noticed, and replaced, at the next evaluation.
            with contextlib.suppress(OSError):
                self._conn.send(("prefetch", tuple(configs)))

    def close(self) -> None:
        """Ask the child to close its backend and exit; kill it if it does not."""
        if self._conn is not None and self._proc is not None:
            with contextlib.suppress(OSError):
                self._conn.send(("close",))
            self._proc.join(timeout=30)
        self._kill()

    def _require_job(self) -> Job:
        if self._job is None:
            raise CutuneError("the isolated backend has no job; call open() first")
        return self._job

    def _start(self) -> DeviceInfo:
        """Start a child and open the job there; where the original fails at a ragged size and the child's
        CUDA context is lost, reopen in a new child assuming the `multiple_of` it evidently needs."""
        notes: list[str] = []
        for attempt in range(RAGGED_ATTEMPTS):
            try:
                info = self._start_once()
            except RaggedSizeFailed as e:
                spec, note = e.failure.apply(self._require_job().spec, last=attempt >= RAGGED_ATTEMPTS - 2)
                notes.append(note)
                self._job = replace(self._require_job(), spec=spec)
                continue
            self._info = info = replace(info, notes=(*notes, *info.notes))
            return info
        raise CutuneError(f"{notes[-1]}; still failing after {RAGGED_ATTEMPTS} attempts")

    def _start_once(self) -> DeviceInfo:
        job = self._require_job()
        if self._info is not None:  # a replacement: fresh inputs, so a fresh reference
            self.restarts += 1
            job = replace(job, seed=job.seed + self.restarts)
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        proc = context.Process(
            target=serve,
            args=(child, self.backend, self.options),
            daemon=True,
            name=f"cutune-worker-{self.backend}",
        )
        # Ctrl-C sends SIGINT to the whole process group: the child must not die of it (the parent decides,
        # and stops after the current trial). Blocked here, the signal stays blocked in the new process until
        # `serve` ignores it, so no moment of its start-up can be interrupted.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            proc.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        child.close()  # so that the child's death reads as end-of-file here
        self._proc, self._conn = proc, parent
        try:
            parent.send(("open", job))
            if not parent.poll(self.start_timeout_s):
                raise CutuneError(f"the {self.backend} worker did not open the job within {self.start_timeout_s:g} s")
            reply = parent.recv()
        except (EOFError, OSError):
            raise CutuneError(f"the {self.backend} worker {self._death()} while opening the job") from None
        except CutuneError:
            self._kill()
            raise
        if reply[0] == "ragged":
            self._kill()
            raise RaggedSizeFailed(reply[1])
        if reply[0] != "info":
            log.debug("the %s worker could not open the job:\n%s", self.backend, reply[2])
            self._kill()
            raise CutuneError(f"the {self.backend} worker could not open the job: {reply[1]}")
        self._info = reply[1]
        return reply[1]

    def _death(self) -> str:
        """Reap a dead child and say how it died."""
        code = self._reap()
        if code is not None and code < 0:
            try:
                how = signal.Signals(-code).name
            except ValueError:
                how = f"signal {-code}"
            return f"the worker died ({how}); it was replaced"
        return f"the worker exited (code {code}); it was replaced"

    def _reap(self) -> int | None:
        proc = self._proc
        code = None
        if proc is not None:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
                proc.join()
            code = proc.exitcode
        self._drop()
        return code

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
            self._proc.join()
        self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._proc = None
        self._conn = None


def serve(conn: Connection, backend: str, options: Mapping[str, Any]) -> None:
    """The child's loop: build the backend, then answer messages until told to close."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C (see IsolatedBackend._start)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    from cutune.gpu.registry import resolve_backend

    instance = resolve_backend(backend)(**options)
    while True:
        try:
            message = conn.recv()
        except EOFError:  # the parent went away
            break
        kind = message[0]
        if kind == "close":
            break
        if kind == "prefetch":  # a hint: nobody waits for an answer, so a failure is only logged
            try:
                instance.prefetch(message[1])
            except Exception:
                log.warning("prefetch failed in the worker", exc_info=True)
            continue
        try:
            if kind == "open":
                try:
                    conn.send(("info", instance.open(message[1])))
                except RaggedSizeFailed as e:  # the parent reopens the job in a fresh process
                    conn.send(("ragged", e.failure))
                    os._exit(_UNHEALTHY_EXIT)
            elif kind in ("verify", "sanitize"):
                check = instance.verify(*message[1:]) if kind == "verify" else instance.sanitize(message[1])
                conn.send(("check", check, instance.healthy))
                if not instance.healthy:
                    os._exit(_UNHEALTHY_EXIT)
            else:
                conn.send(("measurement", instance.evaluate(*message[1:]), instance.healthy))
                if not instance.healthy:
                    # The CUDA context is dead: skip clean-up that would touch it.
                    os._exit(_UNHEALTHY_EXIT)
        except Exception as e:  # reported to the parent, which replaces this process
            conn.send(("error", f"{type(e).__name__}: {e}", traceback.format_exc()))
    instance.close()
