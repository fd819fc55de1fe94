"""The Optuna study of one kernel on one device: its key, its storage, and its trials read back."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import optuna
import sqlalchemy.exc
from optuna.distributions import BaseDistribution
from optuna.storages import BaseStorage, JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from cutune.errors import StudyError
from cutune.gpu.backend import Backend, CompileInfo, DeviceInfo, Failure, Job, Timing
from cutune.gpu.replay import ReplaySource, replay_source
from cutune.source_file import text_hash
from cutune.template.model import Config, Space
from cutune.tune.liveness import fail_stale_trials
from cutune.tune.options import JOURNAL_PREFIX, Liveness
from cutune.tune.plan import PLAN
from cutune.tune.space import distributions

# user attributes of a trial
TIMINGS = "timings"  # per problem size: Timing fields
COMPILE = "compile"  # CompileInfo fields
# a Failure value; infeasible proposals too (PRUNED, never measured). A FAIL trial without it was
# interrupted (Ctrl-C, a killed run) and says nothing about its configuration.
FAILURE = "failure"
DETAIL = "detail"
REPEAT_OF = "repeat_of"  # the number of the trial whose outcome this proposal repeats (not re-measured)
# a claim given up unmeasured (FAIL): the number of another worker's trial on the same configuration,
# "budget" when others had taken the budget, "original" when the original was not measured yet
YIELDED_TO = "yielded_to"
WORKER = "worker"  # which worker (GPU and host) measured the trial
QUEUED = "fixed_params"  # Optuna's system attribute of an enqueued trial (retries are enqueued)
# user attribute of the study
SEARCH_SECONDS = "search_seconds"  # search wall time spent over all runs

_DETAIL_CHARS = 2000  # compiler logs can be long; the start names the problem
_MIN_TRIALS_FOR_IMPORTANCE = 10


@dataclass(frozen=True)
class StudyKey:
    """What makes measurements comparable: the same kernel source, spec and timing, on the same device."""

    kernel: str
    source_hash: str  # of the templated source
    spec_hash: str  # of the spec, the space and the timing options
    device: str

    @property
    def name(self) -> str:
        """The study name, e.g. `rms_norm@NVIDIA-H200:3f2a…:9c1d…`."""
        device = re.sub(r"[^A-Za-z0-9]+", "-", self.device).strip("-")
        return f"{self.kernel}@{device}:{self.source_hash[:12]}:{self.spec_hash[:12]}"


def study_key(job: Job, device: DeviceInfo, backend: Backend | None = None) -> StudyKey:
    """The key of a job's study on a device; a replayed study is stored apart from measured ones."""
    source = replay_source(backend) if backend is not None else None
    # where the spec sits (file, line numbers) does not change what is measured
    spec = dataclasses.replace(
        job.spec,
        path=None,
        line=None,
        lines={},
        args=tuple(dataclasses.replace(a, line=None) for a in job.spec.args),
    )
    return StudyKey(
        kernel=job.template.kernel,
        source_hash=text_hash(job.template.source),
        spec_hash=text_hash(repr((spec, job.space, job.timing))),
        device=device.name if source is None else f"{device.name} replay {_recording_id(source)}",
    )


def _recording_id(source: ReplaySource) -> str:
    """A short name for a recording in a study name (its file name repeats the device and runs long)."""
    return text_hash(f"{Path(source.recording).name}\n{source.date}")[:10]


def _storage(url: str) -> str | BaseStorage:
    # The default is Optuna's journal file: an append-only log, fsync'd at every operation, so each
    # finished trial is on disk before the next one starts and a killed run cannot damage earlier
    # records; it also works where SQLite's locking does not (NFS). Measured here: ~7 ms of storage
    # per trial against ~65 ms for SQLite through SQLAlchemy. Any SQLAlchemy URL selects RDBStorage.
    if url.startswith(JOURNAL_PREFIX):
        return JournalStorage(JournalFileBackend(url.removeprefix(JOURNAL_PREFIX)))
    return url


def open_study(key: StudyKey, url: str, liveness: Liveness | None = None) -> optuna.Study:
    """Create the study of `key` in storage `url`, or load it; fails (for a retry) trials of dead workers."""
    try:
        study = optuna.create_study(
            study_name=key.name,
            storage=_storage(url),
            direction="minimize",
            load_if_exists=True,
            # a placeholder: the search picks the sampler once it knows what the study holds
            sampler=optuna.samplers.RandomSampler(),
        )
    except (ValueError, ImportError, OSError, RuntimeError, sqlalchemy.exc.SQLAlchemyError) as e:
        raise StudyError(f"cannot open study {key.name} in {url}: {e}") from e
    if not study.user_attrs:  # new: say what it is, for people browsing the storage
        for field_name, value in dataclasses.asdict(key).items():
            study.set_user_attr(field_name, value)
    # Other workers may be running trials of this study: only those of silent (dead) workers are failed
    fail_stale_trials(study, liveness or Liveness())
    return study


def load_study(url: str, name: str | None = None) -> optuna.Study:
    """An existing study of storage `url`: `name`, or the only one there that a cutune run has planned."""
    storage = _storage(url)
    try:
        if name is None:
            planned = [s.study_name for s in optuna.get_all_study_summaries(storage) if PLAN in s.user_attrs]
            if len(planned) != 1:
                found = ", ".join(planned) or "none"
                raise StudyError(f"{url} holds {len(planned)} cutune studies ({found}); name one with --study")
            name = planned[0]
        return optuna.load_study(study_name=name, storage=storage, sampler=optuna.samplers.RandomSampler())
    except KeyError:
        raise StudyError(f"no study {name!r} in {url}; start it with `cutune tune … --storage {url}`") from None
    except (ValueError, ImportError, OSError, RuntimeError, sqlalchemy.exc.SQLAlchemyError) as e:
        raise StudyError(f"cannot open study {name} in {url}: {e}") from e


@dataclass(frozen=True)
class TrialRecord:
    """One finished trial read back: its configuration and what happened to it."""

    number: int
    config: Config
    objective: float | None  # geometric mean over sizes of time / original time; None when failed
    timings: tuple[Timing, ...] = ()
    compile: CompileInfo | None = None
    failure: Failure | None = None
    detail: str = ""
    measured: bool = True  # False: turned away as infeasible before reaching the backend
    worker: str = ""  # which worker measured it, where several share the study

    @property
    def ok(self) -> bool:
        return self.objective is not None


def read_record(trial: FrozenTrial) -> TrialRecord | None:
    """The record of a finished trial; None for repeats, interruptions and unfinished trials."""
    attrs = trial.user_attrs
    interrupted = trial.state == TrialState.FAIL and FAILURE not in attrs
    if REPEAT_OF in attrs or interrupted or not trial.state.is_finished():
        return None
    compile_info = attrs.get(COMPILE)
    return TrialRecord(
        number=trial.number,
        config=Config.of(trial.params),
        objective=trial.value if trial.state == TrialState.COMPLETE else None,
        timings=tuple(Timing(**t) for t in attrs.get(TIMINGS, ())),
        compile=CompileInfo(**compile_info) if compile_info else None,
        failure=Failure(attrs[FAILURE]) if FAILURE in attrs else None,
        detail=attrs.get(DETAIL, ""),
        measured=trial.state != TrialState.PRUNED,
        worker=attrs.get(WORKER, ""),
    )


def record_attrs(record: TrialRecord) -> dict[str, object]:
    """The user attributes that store a record in its trial."""
    attrs: dict[str, object] = {}
    if record.timings:
        attrs[TIMINGS] = [dataclasses.asdict(t) for t in record.timings]
    if record.compile is not None:
        attrs[COMPILE] = dataclasses.asdict(record.compile)
    if record.failure is not None:
        attrs[FAILURE] = record.failure.value
    if record.detail:
        attrs[DETAIL] = record.detail[:_DETAIL_CHARS]
    return attrs


def param_importances(records: Sequence[TrialRecord], space: Space) -> dict[str, float]:
    """Optuna's parameter importances over the measured configurations; empty when too few vary."""
    ok = [r for r in records if r.ok]
    varying = [p.name for p in space.params if len({r.config[p.name] for r in ok}) > 1]
    if len(varying) < 2 or len(ok) < _MIN_TRIALS_FOR_IMPORTANCE:
        return {}
    # an in-memory copy holding each configuration once: repeats and infeasible proposals would skew it
    study = optuna.create_study(direction="minimize")
    dists: dict[str, BaseDistribution] = dict(distributions(space))
    study.add_trials(
        optuna.trial.create_trial(params=dict(r.config), distributions=dists, value=r.objective) for r in ok
    )
    return {k: float(v) for k, v in optuna.importance.get_param_importances(study, params=varying).items()}
