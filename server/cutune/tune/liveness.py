"""Workers that share a study show they are alive; the trial of one that went silent is failed and retried.

Each running trial carries a heartbeat, a trial system attribute `[trial number, unix time, host, pid]`
that its worker rewrites every `heartbeat_s` from a thread, whatever the trial is doing. A RUNNING trial
heard from neither by heartbeat nor by its start for `grace_s` belongs to a worker that died (`kill -9`,
a lost host), and so does one whose worker process is gone from this very host: any worker fails it
and hands its configuration back through Optuna's
`RetryHeartbeatStaleTrialCallback`, as a WAITING trial that the next `ask()` of any worker takes.
Optuna 5 gives heartbeats only to its RDB storage (never to the journal) and skips trials that have not
beaten yet, so cutune keeps its own, the same on every storage; hosts sharing a study need clocks
that agree (NTP) to well within the grace period.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import optuna
from optuna.exceptions import ExperimentalWarning, UpdateFinishedTrialError
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState

from cutune.tune.options import Liveness

ALIVE = "cutune:alive"  # trial system attribute: [trial number, unix time of the last beat, host, pid]
HOST = socket.gethostname()
log = logging.getLogger(__name__)


@contextlib.contextmanager
def heartbeat(study: optuna.Study, trial: optuna.Trial, liveness: Liveness) -> Iterator[None]:
    """Beat for `trial` until the block ends (the first beat before it starts)."""
    stop = threading.Event()

    def beat() -> None:
        number = trial.number
        while True:
            try:
                study._storage.set_trial_system_attr(trial._trial_id, ALIVE, [number, time.time(), HOST, os.getpid()])
            except UpdateFinishedTrialError:  # told meanwhile, by us or by a worker that took it for dead
                return
            except Exception:  # a storage hiccup: the next beat tries again, well within the grace period
                log.warning("heartbeat of trial %d failed", number, exc_info=True)
            if stop.wait(liveness.heartbeat_s):
                return

    beat_once = threading.Thread(target=beat, name=f"cutune-heartbeat-{trial.number}", daemon=True)
    beat_once.start()
    try:
        yield
    finally:
        stop.set()
        beat_once.join()


def worker_name(device: int | None = None) -> str:
    """How a worker is named in the trials it measures: host, GPU and process."""
    gpu = "" if device is None else f"/gpu{device}"
    return f"{HOST}{gpu}/pid{os.getpid()}"


def _beat(trial: FrozenTrial) -> list[Any] | None:
    alive = trial.system_attrs.get(ALIVE)
    # a retried trial inherits its predecessor's attributes: only a beat of this very trial counts
    if isinstance(alive, list) and len(alive) == 4 and alive[0] == trial.number:
        return alive
    return None


def last_sign_of_life(trial: FrozenTrial) -> float:
    """When a running trial was last heard from (unix time): its heartbeat, else its start."""
    beat = _beat(trial)
    if beat is not None:
        return float(beat[1])
    started = trial.datetime_start or datetime.datetime.now()
    return started.timestamp()  # Optuna stamps local time without a zone; timestamp() reads it so


def _died_here(trial: FrozenTrial) -> bool:
    """Whether the trial's worker ran on this host and its process is gone (no need to wait out the grace)."""
    beat = _beat(trial)
    if beat is None or beat[2] != HOST:
        return False
    try:
        os.kill(int(beat[3]), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, owned by another user
        return False
    return False


def is_stale(trial: FrozenTrial, liveness: Liveness, now: float | None = None) -> bool:
    """Whether a RUNNING trial's worker is dead: silent past the grace period, or gone from this host."""
    now = time.time() if now is None else now
    if trial.state != TrialState.RUNNING:
        return False
    return now - last_sign_of_life(trial) > liveness.grace_s or _died_here(trial)


def fail_stale_trials(study: optuna.Study, liveness: Liveness) -> list[int]:
    """Fail the running trials of silent workers and queue each configuration again; their numbers."""
    with warnings.catch_warnings():  # "experimental" since Optuna 2.8; its behaviour is what we rely on
        warnings.simplefilter("ignore", ExperimentalWarning)
        retry = RetryHeartbeatStaleTrialCallback()
    failed = []
    now = time.time()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if not is_stale(trial, liveness, now):
            continue
        try:
            # set_trial_state_values is a compare-and-set on RUNNING in every storage: when two
            # workers see the same silent trial, one fails it (and retries it), the other is told no
            if not study._storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL):
                continue
        except UpdateFinishedTrialError:
            continue
        log.warning("trial %d: its worker was silent for over %g s; retrying it", trial.number, liveness.grace_s)
        retry(study, study._storage.get_trial(trial._trial_id))
        failed.append(trial.number)
    return failed
