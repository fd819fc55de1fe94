"""Tuning options, grouped by concern: budget, search, selection, and where things are stored."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cutune.errors import StudyError
from cutune.tune.samplers import AUTO, NAMES

JOURNAL_PREFIX = "journal:"  # a storage URL naming an Optuna journal file


@dataclass(frozen=True)
class Budget:
    """How much a run may spend: trials of the study in all (a resumed run spends only what earlier runs
    left), wall time of this whole run, and optionally of the search alone (over every run of the study)."""

    trials: int = 100  # configurations measured on the GPU, the original included
    seconds: float | None = None  # the whole run: search, re-checks, selection, sanitizer, held-out; None: no limit
    search_seconds: float | None = None  # the search alone, over all runs of the study; None: no limit of its own

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise StudyError(f"the trial budget must be at least 1, not {self.trials}")
        for name, value in (("time budget", self.seconds), ("search time budget", self.search_seconds)):
            if value is not None and value <= 0:
                raise StudyError(f"the {name} must be positive, not {value}")


@dataclass(frozen=True)
class SearchOptions:
    """How configurations are proposed."""

    sampler: str = AUTO  # a name in cutune.tune.samplers.NAMES
    seed: int = 0
    # rounds that measure the best configuration's neighbours (one parameter one value away), each followed by as
    # many of the sampler's own proposals: see cutune.tune.search
    probe: bool = True

    def __post_init__(self) -> None:
        if self.sampler not in NAMES:
            raise StudyError(f"unknown sampler {self.sampler!r}; known: {', '.join(NAMES)}")


@dataclass(frozen=True)
class SelectionOptions:
    """The final re-measurement of the best configurations, interleaved with the original."""

    top_k: int = 5
    rounds: int = 5  # selection rounds: pick the per-size winners (sequential: PICK_ROUNDS, see tune/deadline.py)
    confirm_rounds: int = 5  # separate rounds that confirm them and give the reported times
    # finalists measured between two original runs (A c1 c2 A c3 c4 A for 2); drift is slow, so an original
    # every two finalists cancels it as well (selection rounds of four or more, confirmation rounds of two or more)
    between: int = 2
    verify_seeds: int = 3  # fresh-input re-checks of every finalist before it can win (0: none)
    # pick on PICK_ROUNDS rounds, pruning finalists clearly slower after the first, and confirm each candidate
    # and size as soon as the evidence is enough (after at least 3 rounds); False measures every round
    sequential: bool = True

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise StudyError(f"top_k must be at least 1, not {self.top_k}")
        if self.rounds < 3:  # p10..p90 of fewer rounds says nothing about the spread
            raise StudyError(f"selection needs at least 3 rounds, not {self.rounds}")
        if self.between < 1:
            raise StudyError(f"at least one finalist runs between two original runs, not {self.between}")
        if self.confirm_rounds < 3:
            raise StudyError(f"confirmation needs at least 3 rounds, not {self.confirm_rounds}")


@dataclass(frozen=True)
class Liveness:
    """How workers sharing a study show they are alive: a trial not heard from for `grace_s` is retried."""

    heartbeat_s: float = 5.0  # a running trial's worker beats this often
    grace_s: float = 60.0  # silence after which its trial is failed and handed to another worker

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_s < self.grace_s:
            raise StudyError(f"need 0 < heartbeat ({self.heartbeat_s:g} s) < grace period ({self.grace_s:g} s)")


@dataclass(frozen=True)
class TuneOptions:
    """Everything `tune` needs besides the job and the backend."""

    workspace: Path
    budget: Budget = field(default_factory=Budget)
    search: SearchOptions = field(default_factory=SearchOptions)
    selection: SelectionOptions = field(default_factory=SelectionOptions)
    # None: journal:<workspace>/.cutune/studies.journal; or any SQLAlchemy URL (sqlite:///...)
    storage_url: str | None = None
    # compute-sanitizer (memcheck, racecheck) on the winners before they are reported; None: where it exists
    sanitize: bool | None = None
    liveness: Liveness = field(default_factory=Liveness)  # stated in the study for every worker

    def __post_init__(self) -> None:
        if self.storage_url is not None and not self.storage_url.startswith(JOURNAL_PREFIX):
            _check_database_url(self.storage_url)

    @property
    def state_dir(self) -> Path:
        """`<workspace>/.cutune`, where studies and results live."""
        return self.workspace / ".cutune"

    def storage(self) -> str:
        """The study storage URL (creating the default journal's folder)."""
        if self.storage_url is not None:
            return self.storage_url
        self.state_dir.mkdir(parents=True, exist_ok=True)
        return f"{JOURNAL_PREFIX}{(self.state_dir / 'studies.journal').resolve()}"


def _check_database_url(url: str) -> None:
    """Raise StudyError unless `url` is a SQLAlchemy URL of a known database (checked before any work starts)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        make_url(url).get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError) as e:
        raise StudyError(
            f"storage {url!r} is neither {JOURNAL_PREFIX}FILE nor a database URL such as sqlite:///studies.db ({e})"
        ) from None
