"""Several workers on one study: real `cutune` processes replaying recorded H200 measurements over a
journal file and over a real PostgreSQL (scripts/postgres.sh), plus threads racing on one journal."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from optuna.trial import TrialState

from cutune.errors import StudyError
from cutune.gpu.backend import DeviceInfo, Measurement
from cutune.limits import limits_for
from cutune.project import build_job, open_kernel
from cutune.template.model import Config
from cutune.tune.liveness import is_stale
from cutune.tune.options import Budget, Liveness, SearchOptions, TuneOptions
from cutune.tune.parallel import join, parse_devices
from cutune.tune.plan import StudyPlan, from_json, plan_for, read_plan, to_json, write_plan
from cutune.tune.search import SearchOutcome, run_search
from cutune.tune.space import Feasibility, feasible_configs
from cutune.tune.study import WORKER, open_study, study_key
from tests.tune.fake_backend import DEVICE, SPACE, SPEC, FakeBackend, make_job
from tests.tune.parallel_workers import (
    FEASIBLE,
    ROOT,
    cutune,
    duplicates,
    finish,
    interrupted,
    measured_trials,
    the_study,
    tune_args,
    wait_for,
    worker_args,
    workers_of,
    workspace,
)


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """The URL of a throwaway PostgreSQL: scripts/test.sh's, else one this module starts and stops."""
    if os.environ.get("CUTUNE_TEST_POSTGRES_URL"):
        yield os.environ["CUTUNE_TEST_POSTGRES_URL"]
        return
    folder = tempfile.mkdtemp(prefix="cutune-pg-")  # not under pytest's 0700 tree: the server's user must reach it
    script = ROOT / "scripts" / "postgres.sh"
    started = subprocess.run(["bash", script, "start", folder], capture_output=True, text=True, check=False)
    if started.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL tests: {started.stderr}")
        pytest.skip(f"no PostgreSQL server here: {started.stderr.strip()}")
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run(["bash", script, "stop", folder], check=False)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(params=["journal", "postgres"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh storage URL: a journal file, or a fresh database in the test PostgreSQL."""
    if request.param == "journal":
        return f"journal:{tmp_path / 'shared.journal'}"
    import sqlalchemy

    url: str = request.getfixturevalue("postgres_url")
    database = f"t{abs(hash(request.node.nodeid)) % 10**9}"
    engine = sqlalchemy.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text(f"DROP DATABASE IF EXISTS {database}"))
        conn.execute(sqlalchemy.text(f"CREATE DATABASE {database}"))
    engine.dispose()
    return url.rsplit("/", 1)[0] + "/" + database


def test_three_gpu_workers_share_the_budget_and_never_measure_twice(tmp_path: Path, storage: str) -> None:
    source = workspace(tmp_path)
    log = tmp_path / "tune.log"
    proc = cutune(*tune_args(source, storage, trials=24, pace=0.05), "--devices", "0,1,2", log=log)
    text = finish(proc, log)
    assert "3 workers; the finalists were re-measured on GPU 0 (NVIDIA H200)" in text
    study = the_study(storage)
    measured = measured_trials(study)
    assert len(measured) == 24, text  # the study's budget, not each worker's
    assert not duplicates(measured)
    assert len(workers_of(measured)) >= 2, "one worker did everything; the test shows no sharing"


def test_an_exhaustive_search_measures_each_configuration_once_over_all_workers(tmp_path: Path) -> None:
    source = workspace(tmp_path)
    storage = f"journal:{tmp_path / 'shared.journal'}"
    log = tmp_path / "tune.log"
    finish(cutune(*tune_args(source, storage, trials=200, pace=0.02), "--devices", "0,1", log=log), log)
    measured = measured_trials(the_study(storage))
    assert len(measured) == FEASIBLE and not duplicates(measured)


def test_kill_9_of_a_worker_keeps_every_finished_trial_and_its_trial_is_retried(tmp_path: Path, storage: str) -> None:
    source = workspace(tmp_path)
    lead_log, logs = tmp_path / "tune.log", [tmp_path / "w1.log", tmp_path / "w2.log"]
    lead = cutune(*tune_args(source, storage, trials=30, pace=0.15, grace=4), log=lead_log)
    wait_for("the study's plan", lambda: _planned(storage))
    workers = [cutune(*worker_args(storage, pace=0.15), log=log) for log in logs]
    victim = workers[0]
    study = the_study(storage)

    def victim_mid_trial() -> bool:
        # a trial that measures: one whose configuration is measured already is answered from the study
        # (a repeat), and is no trial to retry
        running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        measured = measured_trials(study)
        mine = [
            t
            for t in running
            if f"/pid{victim.pid}" in t.user_attrs.get(WORKER, "") and all(t.params != m.params for m in measured)
        ]
        return bool(mine) and len(measured) >= 4

    def victim_stopped_mid_trial() -> bool:
        # SIGSTOP freezes the victim, so the trial seen running is still running when SIGKILL lands; seen
        # again after a pause, in case a write it sent just before (a PostgreSQL commit in flight) landed since
        os.kill(victim.pid, signal.SIGSTOP)
        if victim_mid_trial():
            time.sleep(0.5)
            if victim_mid_trial():
                return True
        os.kill(victim.pid, signal.SIGCONT)
        return False

    wait_for("a trial of the victim", victim_stopped_mid_trial)
    before = {t.number: (t.state, t.value) for t in study.get_trials(deepcopy=False) if t.state.is_finished()}
    killed = [
        t.number
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        if f"/pid{victim.pid}" in t.user_attrs.get(WORKER, "")
    ]
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    finish(workers[1], logs[1])
    finish(lead, lead_log)

    after = {t.number: t for t in the_study(storage).get_trials(deepcopy=False)}
    assert all((after[n].state, after[n].value) == kept for n, kept in before.items())  # nothing finished was lost
    assert len(killed) == 1 and interrupted(after[killed[0]])
    config = after[killed[0]].params
    retried = [t for t in measured_trials(the_study(storage)) if t.params == config]
    assert len(retried) == 1 and retried[0].number > killed[0]
    assert f"/pid{victim.pid}" not in retried[0].user_attrs[WORKER]
    measured = measured_trials(the_study(storage))
    assert len(measured) == 30 and not duplicates(measured)


def test_a_worker_on_another_gpu_refuses_to_join(tmp_path: Path) -> None:
    source = workspace(tmp_path)
    storage = f"journal:{tmp_path / 'shared.journal'}"
    log = tmp_path / "tune.log"
    finish(cutune(*tune_args(source, storage, trials=3, pace=0.0), log=log), log)
    # TEST-ONLY: the H200 recording relabelled as made on an H100, so the worker's "GPU" differs
    lines = (ROOT / "benchmarks/results/recordings/silu_and_mul.tune.NVIDIA-H200.2026-11-21.jsonl").read_text()
    header, rest = lines.split("\n", 1)
    data = json.loads(header)
    data["device"]["name"] = "NVIDIA H100 80GB HBM3"
    h100 = tmp_path / "h100.jsonl"
    h100.write_text(json.dumps(data) + "\n" + rest)
    args = ["worker", "--storage", storage, "--backend", "replay", "--replay", h100]
    proc = cutune(*args, log=tmp_path / "w.log")
    assert proc.wait(60) == 2
    text = (tmp_path / "w.log").read_text()
    assert "differs from the study's (NVIDIA H200, driver 13.0)" in text and "Traceback" not in text


def test_a_worker_names_the_studies_when_the_storage_holds_several(tmp_path: Path) -> None:
    storage = f"journal:{tmp_path / 'empty.journal'}"
    proc = cutune(*worker_args(storage, pace=0.0), log=tmp_path / "w.log")
    assert proc.wait(60) == 2
    assert "holds 0 cutune studies" in (tmp_path / "w.log").read_text()


class PacedFakeBackend(FakeBackend):
    """The table's fake backend taking 10 ms a measurement, so that claims overlap measurements (no GPU)."""

    def evaluate(self, config: Config, at: Sequence[int] | None = None) -> Measurement:
        time.sleep(0.01)
        return super().evaluate(config, at)


def test_threads_racing_on_one_journal_measure_each_configuration_once(options: TuneOptions) -> None:
    """Four workers claim at the same moments (no pace between trials): the claim rule holds."""
    limits = limits_for("sm_90")
    check = Feasibility(SPACE, SPEC, limits)
    feasible = feasible_configs(SPACE, SPEC, limits)
    key = study_key(make_job(), DEVICE)
    backends = [PacedFakeBackend(seed=i) for i in range(4)]
    barrier = threading.Barrier(len(backends))
    errors: list[BaseException] = []
    outcomes: list[SearchOutcome] = []

    def work(i: int, budget: Budget) -> None:
        backend = backends[i]
        backend.open(make_job())
        study = open_study(key, options.storage())  # each worker its own storage object
        barrier.wait()
        try:
            options_ = SearchOptions(sampler="tpe", seed=1)
            outcomes.append(run_search(study, backend, check, feasible, budget, options_, queue_start=i / 4))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i, Budget(trials=30))) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    default = SPACE.default()
    calls: list[Config] = [c for b in backends for c in b.calls if c != default]
    # the budget in all, each configuration once; which threads measured depends on the scheduler (that
    # workers share the work is shown by the process test above, whose workers are paced)
    assert len(calls) == 29 and len(set(calls)) == 29
    # the original: once as the study's trial, and once more on each other worker that measured anything,
    # as the baseline of its objectives on its own device
    workers = sum(1 for b in backends if b.calls)
    assert 1 <= sum(c == default for b in backends for c in b.calls) <= workers
    # each reports what it measured itself, not the whole study's count
    assert sum(o.own for o in outcomes) == 30 and all(o.measured == 30 for o in outcomes)


def test_the_plan_round_trips_through_json() -> None:
    ctx = open_kernel(ROOT / "samples" / "merge_attn_states.cu", "merge_attn_states_kernel")
    plan = StudyPlan(build_job(ctx), Budget(50, 30.0), SearchOptions("tpe", 3), Liveness(2, 9), "NVIDIA H200", "13.0")
    again = from_json(StudyPlan, json.loads(json.dumps(to_json(plan))))
    assert again == plan and again.job.spec == plan.job.spec and again.job.template == plan.job.template
    assert plan.refusal(DeviceInfo("NVIDIA H200", "sm_90", 132, 0, driver="13.0")) is None
    assert "driver 12.8" in (plan.refusal(DeviceInfo("NVIDIA H200", "sm_90", 132, 0, driver="12.8")) or "")


def test_a_study_without_a_plan_is_refused(options: TuneOptions) -> None:
    study = open_study(study_key(make_job(), DEVICE), options.storage())
    with pytest.raises(StudyError, match="holds no cutune plan"):
        read_plan(study)


def test_a_running_trial_is_stale_only_after_the_grace_period(options: TuneOptions) -> None:
    study = open_study(study_key(make_job(), DEVICE), options.storage())
    trial = study.ask()
    frozen = study._storage.get_trial(trial._trial_id)
    assert not is_stale(frozen, Liveness(1, 5))
    assert is_stale(frozen, Liveness(1, 5), now=frozen.datetime_start.timestamp() + 6)  # type: ignore[union-attr]


def test_a_worker_opened_with_the_plans_job_searches_without_opening_again(options: TuneOptions) -> None:
    job = make_job()
    study = open_study(study_key(job, DEVICE), options.storage())
    write_plan(study, plan_for(job, DEVICE, dataclasses.replace(options, budget=Budget(4, None))))
    ready = FakeBackend()
    ready.open(job)
    outcome = join(options.storage(), study.study_name, ready, opened=(job, DEVICE))
    assert ready.opened == 1 and ready.closed == 1 and outcome.measured == 4
    # opened with another job (a changed spec): closed, then opened with the plan's
    other = make_job(spec=dataclasses.replace(SPEC, sizes=SPEC.sizes[:1]))
    stale = FakeBackend()
    stale.open(other)
    join(options.storage(), study.study_name, stale, opened=(other, DEVICE))
    assert stale.opened == 2 and stale.closed == 2 and stale.sizes == job.spec.sizes


def test_devices_are_parsed() -> None:
    assert parse_devices("0,2", lambda: 0) == (0, 2) and parse_devices("all", lambda: 3) == (0, 1, 2)
    for bad in ("0,0", "x", "-1", ""):
        with pytest.raises(StudyError):
            parse_devices(bad, lambda: 1)


def _planned(storage: str) -> bool:
    try:
        read_plan(the_study(storage))
    except StudyError:
        return False
    return True
