from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Mapping

import pytest
from rich.console import Console

from cutune.cli_render.tune import render_result
from cutune.errors import StudyError
from cutune.gpu.backend import Failure
from cutune.gpu.replay import RecordingBackend, ReplayBackend
from cutune.template.model import Config
from cutune.tune import (
    Budget,
    Progress,
    TuneOptions,
    read_result,
    stored_result_path,
    tune,
    write_result,
)
from tests.tune.fake_backend import SPACE, FakeBackend, make_job, table_time

ORIGINAL = SPACE.default()


def test_tune_finds_verifies_and_stores_the_gain(options: TuneOptions) -> None:
    seen: list[Progress] = []
    backend = FakeBackend()
    result = tune(make_job(), backend, options, progress=seen.append)
    assert backend.opened == backend.closed == 2  # the spec sizes, then the held-out size between them
    # the held-out sizes add no ragged tails: each configuration measured there was checked at the tuned sizes' tails
    assert [s.ragged for s in backend.specs] == [True, False]
    assert result.held_out and result.held_out[0].size == {"N": 1 << 22} and result.held_out[0].speedup > 1
    assert result.dispatch is not None and result.dispatch.configs == (result.best,)
    assert result.sampler == "grid" and result.stop == "exhausted" and result.trials == 55
    searched = [p for p in seen if p.phase == "search"]
    assert result.failures == {} and len(searched) == 55  # the grid holds feasible points only
    # progress names each phase after the search as it starts
    assert [p.phase for p in seen[len(searched) :]] == ["re-check", "selection", "held-out"]
    assert result.significant and result.best["VEC"] == 4 and result.best["UNROLL"] == 2
    assert result.original == ORIGINAL
    assert result.speedup == pytest.approx(1 / (0.78 * 0.97), rel=0.03)
    for s in result.sizes:
        assert s.speedup == pytest.approx(result.speedup, rel=0.03)
        assert s.significant and s.best_config["VEC"] == 4
        assert s.sol_floor_us == pytest.approx(s.size["N"] * 8 / 4260e3 + 2.9)
        assert 50 < (s.pct_of_sol or 0) < 100
    assert next(iter(result.importances)) == "VEC"  # the table's biggest lever
    assert read_result(stored_result_path(options, make_job())) == result


def test_no_significant_gain_keeps_the_original(options: TuneOptions) -> None:
    def flat(config: Config, size: Mapping[str, int]) -> float:
        return table_time(ORIGINAL, size) * (0.995 if config["VEC"] == 2 else 1.0)

    result = tune(make_job(), FakeBackend(noise=0.02, time_of=flat), options)
    assert not result.significant and result.best == ORIGINAL and result.speedup == 1.0
    for s in result.sizes:
        assert s.tuned == s.original and s.best_config == ORIGINAL and not s.significant


def test_cancel_returns_the_original_and_keeps_the_trials(options: TuneOptions) -> None:
    cancel = threading.Event()
    result = tune(make_job(), FakeBackend(cancel_after=(8, cancel)), options, cancel=cancel)
    assert result.stop == "cancelled" and result.trials == 8
    assert result.best == ORIGINAL and not result.significant
    assert not stored_result_path(options, make_job()).exists()  # nothing unverified is stored
    backend = FakeBackend()
    resumed = tune(make_job(), backend, options)
    assert resumed.trials == 55 and resumed.significant and resumed.resumed_trials == 8
    # the search went on (first the original once, as this device's baseline); only selection re-measures it
    assert backend.calls[0] == ORIGINAL and ORIGINAL not in backend.calls[1 : 55 - 8 + 1]


def test_a_failing_original_is_an_error_and_the_backend_is_closed(options: TuneOptions) -> None:
    backend = FakeBackend(failures={ORIGINAL: Failure.COMPILE})
    with pytest.raises(StudyError, match="original"):
        tune(make_job(), backend, options)
    assert backend.closed == 1


def test_time_budget_through_tune(options: TuneOptions) -> None:
    # --search-seconds bounds the search alone; --seconds the whole run, selection and held-out included
    searched = dataclasses.replace(options, budget=Budget(trials=1000, search_seconds=0.15))
    result = tune(make_job(), FakeBackend(sleep_s=0.01), searched)
    assert result.stop == "time" and 2 <= result.trials < 55
    assert result.search_seconds >= 0.15
    whole = dataclasses.replace(
        options, budget=Budget(trials=1000, seconds=1.0), storage_url=f"journal:{options.workspace}/whole.journal"
    )
    began = time.monotonic()
    result = tune(make_job(), FakeBackend(sleep_s=0.01), whole)
    assert result.stop == "time" and time.monotonic() - began <= 1.1
    assert result.phases["search"] >= 0.3 and "selection" in result.phases  # the search kept back the rest
    assert read_result(stored_result_path(whole, make_job())) == result


def test_the_result_says_where_the_wall_time_went(options: TuneOptions) -> None:
    result = tune(make_job(), FakeBackend(sleep_s=0.01), dataclasses.replace(options, budget=Budget(trials=12)))
    assert list(result.phases)[:3] == ["open", "search", "re-check"] and "selection" in result.phases
    assert result.phases["search"] >= max(result.search_seconds, 12 * 0.01)  # each measured trial sleeps 10 ms
    assert all(seconds >= 0 for seconds in result.phases.values())
    console = Console(width=160, record=True)
    console.print(render_result(result))
    assert f"wall time: open {result.phases['open']:.1f} s, search {result.phases['search']:.1f} s" in (
        console.export_text()
    )


def test_result_json_round_trip_and_table(options: TuneOptions, tmp_path) -> None:
    result = tune(make_job(), FakeBackend(), dataclasses.replace(options, budget=Budget(trials=12)))
    path = tmp_path / "copy" / "r.json"
    write_result(result, path)
    back = read_result(path)
    assert back == result and back.speedup == result.speedup
    console = Console(width=160, record=True)
    console.print(render_result(result))
    text = console.export_text()
    assert "scale on Fake H200 (table)" in text and "N=1048576" in text and "N=16777216" in text
    assert ("no significant gain" in text) != result.significant


def test_read_result_rejects_garbage(tmp_path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"format": 1}')
    with pytest.raises(StudyError, match="cannot read"):
        read_result(path)


def test_tune_runs_on_a_replayed_recording(options: TuneOptions, tmp_path) -> None:
    recording = tmp_path / "scale.fake.jsonl"
    recorded = tune(make_job(), RecordingBackend(FakeBackend(), recording), options)
    fresh = dataclasses.replace(options, workspace=tmp_path / "elsewhere")
    replayed = tune(make_job(), ReplayBackend(recording, noise=0.005), fresh)
    assert replayed.device == recorded.device and replayed.trials == recorded.trials == 55
    assert replayed.significant and replayed.best == recorded.best
    assert replayed.speedup == pytest.approx(recorded.speedup, rel=0.03)
    # labelled: what measured, and for a replay which recording (device and date of the recording)
    assert (recorded.backend, recorded.replayed) == ("fake", None)
    assert replayed.backend == "replay" and replayed.replayed is not None
    assert replayed.replayed.label().startswith("replayed from scale.fake.jsonl (Fake H200 (table), ")
    assert replayed.measured_on() == replayed.replayed.label()
    # the held-out size was recorded too (the recorder continued its file), so it replays
    assert [s.size for s in replayed.held_out] == [s.size for s in recorded.held_out] == [{"N": 1 << 22}]
    # stored apart: the same storage holds a measured and a replayed study of the same job
    again = tune(make_job(), ReplayBackend(recording, noise=0.005), options)
    assert again.study != recorded.study and again.study.startswith("scale@Fake-H200-table-replay-")
    assert again.resumed_trials == 0 and again.trials == 55


def _flagged_job():  # type: ignore[no-untyped-def]
    """The table's kernel with a compile flag REGS (which changes nothing), and a VEC = 4 that loses the small size
    and wins the large one by far."""
    from cutune.template.model import Binding, Space, TunableParam

    space = Space(params=(*SPACE.params, TunableParam("REGS", (0, 64), 0, Binding.FLAG, flag="-maxrregcount={}")))

    def time_of(config: Config, size: Mapping[str, int]) -> float:
        small = size["N"] == 1 << 20
        return table_time(ORIGINAL, size) * ((1.2 if small else 0.4) if config["VEC"] == 4 else 1.0)

    return make_job(space=space), time_of, Config.of({**ORIGINAL, "VEC": 4, "REGS": 64})


def test_a_finalists_twin_under_the_original_flags_is_measured_and_launched_at_the_size_it_wins(
    options: TuneOptions,
) -> None:
    job, time_of, flagged = _flagged_job()
    twin = Config.of({**flagged, "REGS": 0})
    backend = FakeBackend(noise=0.003, time_of=time_of)
    # the search measures only the original and the flagged finalist: the twin is measured after it, as a trial
    result = tune(job, backend, dataclasses.replace(options, budget=Budget(trials=2)), start=[flagged])
    assert twin in backend.calls
    assert result.per_file == Config.of({"REGS": 0})  # the original's flags: the small size keeps the original
    assert [s.best_config for s in result.sizes] == [result.original, twin]


def test_a_cancelled_run_measures_no_twin(options: TuneOptions) -> None:
    job, time_of, flagged = _flagged_job()
    cancel = threading.Event()
    backend = FakeBackend(noise=0.003, time_of=time_of, cancel_after=(2, cancel))
    tune(job, backend, dataclasses.replace(options, budget=Budget(trials=2)), start=[flagged], cancel=cancel)
    assert Config.of({**flagged, "REGS": 0}) not in backend.calls
