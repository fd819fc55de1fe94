from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Mapping

import optuna
import pytest
from optuna.trial import TrialState

from cutune.errors import StudyError
from cutune.gpu.backend import Failure
from cutune.limits import limits_for
from cutune.spec import ArgSpec
from cutune.template.model import Binding, Config, TunableParam
from cutune.template.recipes.index_bits import index_param, narrowed
from cutune.template.variants import VARIANT
from cutune.tune.options import Budget, SearchOptions, TuneOptions
from cutune.tune.search import Progress, SearchOutcome, StopReason, run_search, variant_moves, variant_seeds
from cutune.tune.space import Feasibility, feasible_configs, neighbours
from cutune.tune.study import FAILURE, REPEAT_OF, open_study, study_key
from tests.tune.fake_backend import BASE_US, DEVICE, SPACE, SPEC, FakeBackend, make_job, table_time

LIMITS = limits_for("sm_90")
CHECK = Feasibility(SPACE, SPEC, LIMITS)
FEASIBLE = feasible_configs(SPACE, SPEC, LIMITS)
assert FEASIBLE is not None


def search(
    backend: FakeBackend,
    options: TuneOptions,
    *,
    budget: Budget | None = None,
    sampler: str = "auto",
    enumerate_space: bool = True,
    progress=None,
    cancel: threading.Event | None = None,
) -> tuple[SearchOutcome, optuna.Study]:
    job = make_job()
    backend.open(job)
    study = open_study(study_key(job, DEVICE), options.storage())
    outcome = run_search(
        study,
        backend,
        CHECK,
        FEASIBLE if enumerate_space else None,
        budget or options.budget,
        SearchOptions(sampler=sampler, seed=1),
        progress=progress,
        cancel=cancel,
    )
    return outcome, study


def test_exhaustive_when_the_feasible_space_fits_the_budget(options: TuneOptions) -> None:
    backend = FakeBackend()
    outcome, study = search(backend, options)
    assert outcome.sampler == "grid" and outcome.stop is StopReason.EXHAUSTED
    assert sorted(backend.calls, key=str) == sorted(FEASIBLE, key=str)  # each once, nothing else
    assert study.trials[0].params == dict(SPACE.default())
    assert study.trials[0].value == pytest.approx(1.0)
    best = min(outcome.records, key=lambda r: r.objective or 9)
    assert best.config["VEC"] == 4 and best.config["UNROLL"] == 2  # the table's optimum


def test_tpe_when_the_space_exceeds_the_budget(options: TuneOptions) -> None:
    backend = FakeBackend()
    outcome, study = search(backend, options, budget=Budget(trials=20))
    assert outcome.sampler == "tpe" and outcome.stop is StopReason.BUDGET
    assert outcome.measured == 20 and len(backend.calls) == 20
    assert backend.calls[0] == SPACE.default() and study.trials[0].params == dict(SPACE.default())
    assert len(set(backend.calls)) == 20  # never measured twice


@pytest.mark.parametrize("sampler", ["tpe", "random"])
def test_infeasible_configs_never_reach_the_backend(options: TuneOptions, sampler: str) -> None:
    backend = FakeBackend()
    outcome, study = search(backend, options, budget=Budget(trials=40), sampler=sampler, enumerate_space=False)
    assert all(CHECK.violation(c) is None for c in backend.calls)
    assert len(backend.calls) == outcome.measured == 40
    pruned = study.get_trials(states=(TrialState.PRUNED,))
    assert pruned, "the sampler proposed no infeasible point; the test proves nothing"
    for t in pruned:
        assert t.constraints == {"feasible": 1.0}
        assert CHECK.violation(Config.of(t.params)) is not None
        if REPEAT_OF not in t.user_attrs:
            assert t.user_attrs[FAILURE] == "infeasible"
    assert outcome.failures()["infeasible"] == len({Config.of(t.params) for t in pruned})


def test_failures_are_recorded_and_the_search_goes_on(options: TuneOptions) -> None:
    wrong = Config.of({"THREADS": 128, "VEC": 4, "UNROLL": 2})
    faulty = Config.of({"THREADS": 64, "VEC": 8, "UNROLL": 1})
    backend = FakeBackend(failures={wrong: Failure.WRONG, faulty: Failure.FAULT})
    outcome, study = search(backend, options)
    assert outcome.stop is StopReason.EXHAUSTED and outcome.measured == len(FEASIBLE)
    failed = {Config.of(t.params): t.user_attrs[FAILURE] for t in study.get_trials(states=(TrialState.FAIL,))}
    assert failed == {wrong: "wrong", faulty: "fault"}
    assert outcome.failures() == {"wrong": 1, "fault": 1}
    assert all(r.config not in (wrong, faulty) for r in outcome.records if r.ok)


def test_the_original_failing_stops_the_search(options: TuneOptions) -> None:
    backend = FakeBackend(failures={SPACE.default(): Failure.COMPILE})
    with pytest.raises(StudyError, match="original configuration failed"):
        search(backend, options)
    assert backend.calls == [SPACE.default()]


def test_time_budget(options: TuneOptions) -> None:
    # the search's own limit runs to it; the whole run's limit stops before a trial would pass it (one trial
    # may still run longer than the trials before it: a quarter of the budget allows for a loaded host). A trial
    # costs 0.1 s so that the study's own overhead on a loaded 2-core CI host (tens of ms) cannot decide the count
    for i, (budget, low, high) in enumerate(
        ((Budget(trials=100, search_seconds=1.0), 1.0, 2.0), (Budget(seconds=1.0), 0.5, 1.25))
    ):
        backend = FakeBackend(sleep_s=0.1)
        fresh = dataclasses.replace(options, storage_url=f"journal:{options.workspace}/{i}.journal")
        outcome, _ = search(backend, fresh, budget=budget)
        assert outcome.stop is StopReason.TIME
        assert 3 <= outcome.measured < len(FEASIBLE)
        assert low <= outcome.seconds < high


@pytest.mark.parametrize("url", ["journal", "sqlite"])
def test_resume_continues_without_measuring_again(options: TuneOptions, url: str) -> None:
    if url == "sqlite":
        options = dataclasses.replace(options, storage_url=f"sqlite:///{options.workspace}/studies.db")
    first = FakeBackend(seed=1)
    outcome1, _ = search(first, options, budget=Budget(trials=10))
    second = FakeBackend(seed=2)
    outcome2, study = search(second, options, budget=Budget(trials=25))
    # the original is measured again on this run's device, as the baseline of its objectives, not as a trial
    assert len(first.calls) == 10 and len(second.calls) == 16 and second.calls[0] == SPACE.default()
    assert not set(first.calls) & set(second.calls[1:])  # the original included: done is done
    assert outcome2.measured == 25 and outcome2.stop is StopReason.BUDGET
    measured = [t for t in study.get_trials(states=(TrialState.COMPLETE,)) if REPEAT_OF not in t.user_attrs]
    assert len(measured) == 25
    assert outcome2.original.number == 0 == outcome1.original.number
    assert outcome2.seconds >= outcome1.seconds
    # the same budget again: nothing left to do
    third = FakeBackend()
    outcome3, _ = search(third, options, budget=Budget(trials=25))
    assert third.calls == [] and outcome3.stop is StopReason.BUDGET


def test_resume_switches_to_exhaustive_for_what_is_left(options: TuneOptions) -> None:
    search(FakeBackend(), options, budget=Budget(trials=30))
    backend = FakeBackend()
    outcome, _ = search(backend, options, budget=Budget(trials=100))
    assert outcome.sampler == "grid" and outcome.stop is StopReason.EXHAUSTED
    assert len(backend.calls) == len(FEASIBLE) - 30 + 1 and backend.calls[0] == SPACE.default()  # + baseline


def test_cancel_stops_after_the_current_trial_and_keeps_it(options: TuneOptions) -> None:
    cancel = threading.Event()
    backend = FakeBackend(cancel_after=(5, cancel))
    outcome, _ = search(backend, options, cancel=cancel)
    assert outcome.stop is StopReason.CANCELLED and len(backend.calls) == 5
    stored = open_study(study_key(make_job(), DEVICE), options.storage())
    assert len(stored.get_trials(states=(TrialState.COMPLETE,))) == 5


def test_ctrl_c_during_a_trial_leaves_it_to_be_measured_again(options: TuneOptions) -> None:
    victim = Config.of({"THREADS": 128, "VEC": 2, "UNROLL": 1})
    with pytest.raises(KeyboardInterrupt):
        search(FakeBackend(interrupt_on=victim), options)
    backend = FakeBackend()
    outcome, study = search(backend, options)
    assert victim in backend.calls and outcome.stop is StopReason.EXHAUSTED
    interrupted = [t for t in study.get_trials(states=(TrialState.FAIL,)) if FAILURE not in t.user_attrs]
    assert [Config.of(t.params) for t in interrupted] == [victim]


def test_repeated_proposals_are_answered_from_the_study(options: TuneOptions) -> None:
    backend = FakeBackend()
    _, study = search(backend, options, budget=Budget(trials=45), sampler="tpe")
    repeats = [t for t in study.trials if REPEAT_OF in t.user_attrs]
    assert repeats, "TPE repeated nothing; the test proves nothing"
    assert len(backend.calls) == len(set(backend.calls)) == 45
    for t in repeats:
        earlier = study.trials[t.user_attrs[REPEAT_OF]]
        assert t.params == earlier.params and t.state == earlier.state and t.value == earlier.value


def test_progress_reports_each_measurement(options: TuneOptions) -> None:
    seen: list[Progress] = []
    failing = [c for c in FEASIBLE if c["THREADS"] == 64]
    backend = FakeBackend(failures=dict.fromkeys(failing, Failure.TIMEOUT))
    search(backend, options, budget=Budget(trials=12), sampler="grid", progress=seen.append)
    assert [p.done for p in seen] == list(range(1, 13))
    assert all(p.budget == 12 for p in seen)
    assert seen[0].best == pytest.approx(1.0) and seen[0].best_config == SPACE.default()
    assert all(a.best >= b.best for a, b in itertools.pairwise(seen))  # type: ignore[operator]
    failed = sum(c in failing for c in backend.calls)
    assert failed > 0 and seen[-1].failures == failed


def test_an_infeasible_original_is_refused(options: TuneOptions) -> None:
    spec = dataclasses.replace(SPEC, constraints=("THREADS != 256",))
    check = Feasibility(SPACE, spec, LIMITS)
    study = open_study(study_key(make_job(spec=spec), DEVICE), options.storage())
    with pytest.raises(StudyError, match="infeasible"):
        run_search(study, FakeBackend(), check, None, options.budget, SearchOptions())


def test_the_grid_needs_an_enumerable_space(options: TuneOptions) -> None:
    with pytest.raises(StudyError, match="enumerate"):
        search(FakeBackend(), options, sampler="grid", enumerate_space=False)


def test_study_name_changes_with_source_spec_and_device() -> None:
    job = make_job()
    base = study_key(job, DEVICE).name
    assert study_key(make_job(), DEVICE).name == base
    assert study_key(make_job(source=job.template.source + "\n// edited"), DEVICE).name != base
    assert study_key(make_job(spec=dataclasses.replace(SPEC, sizes=({"N": 1 << 22},))), DEVICE).name != base
    assert study_key(job, dataclasses.replace(DEVICE, name="NVIDIA H100 80GB HBM3")).name != base
    assert (
        study_key(make_job(spec=dataclasses.replace(SPEC, path="/elsewhere.tune.toml", line=7)), DEVICE).name == base
    )  # moving the spec is not a change
    assert base.startswith("scale@Fake-H200-table:")


@pytest.mark.parametrize("url", ["nonsense://", "journal:/nonexistent/dir/studies.journal"])
def test_a_bad_storage_is_a_study_error(url: str) -> None:
    with pytest.raises(StudyError, match="cannot open study"):
        open_study(study_key(make_job(), DEVICE), url)


def test_a_backend_refusal_counts_as_a_measurement(options: TuneOptions) -> None:
    # e.g. a replay that has no recording of a config: it reached the backend, so it spends budget
    unrecorded = {c: Failure.INFEASIBLE for c in FEASIBLE if c["VEC"] == 2}
    backend = FakeBackend(failures=unrecorded)
    outcome, study = search(backend, options, budget=Budget(trials=20), sampler="random")
    assert len(backend.calls) == outcome.measured == 20 and outcome.stop is StopReason.BUDGET
    refused = {Config.of(t.params) for t in study.get_trials(states=(TrialState.FAIL,))}
    assert refused == {c for c in backend.calls if c in unrecorded} != set()


def test_every_variant_is_measured_at_its_defaults_before_the_sampler_takes_over(options: TuneOptions) -> None:
    space = dataclasses.replace(SPACE, params=(*SPACE.params, TunableParam(VARIANT, (0, 1, 2, 3), 0)))
    # VARIANT = 3 is infeasible at the defaults (VEC = 1): it is left to the sampler
    spec = dataclasses.replace(SPEC, constraints=(*SPEC.constraints, "VARIANT * (2 - VEC) <= 2"))
    job = make_job(space=space, spec=spec)
    backend = FakeBackend()
    backend.open(job)
    study = open_study(study_key(job, DEVICE), options.storage())
    check = Feasibility(space, spec, LIMITS)
    outcome = run_search(study, backend, check, None, Budget(12), SearchOptions(sampler="tpe", seed=1))
    assert outcome.sampler == "tpe" and len(backend.calls) == 12
    default = space.default()
    assert backend.calls[:3] == [default, Config.of({**default, VARIANT: 1}), Config.of({**default, VARIANT: 2})]
    assert variant_seeds(Feasibility(SPACE, SPEC, LIMITS)) == []  # no variants, nothing seeded
    # with INDEX_BITS: then the original and each variant with 32-bit indices
    indexed = dataclasses.replace(space, params=(*space.params, index_param()))
    wide = [Config.of({**indexed.default(), VARIANT: v}) for v in (0, 1, 2)]
    assert variant_seeds(Feasibility(indexed, spec, LIMITS)) == [*wide[1:], *(narrowed(c) for c in wide)]
    # with a size that may be compiled in: then the original and each variant with it specialised; not one that is 0
    # at a size (nothing to compile in: the check turns it away before the backend does)
    size = TunableParam("SPECIALIZE_N", (False, True), False, Binding.SPECIALIZE, arg="N")
    zero = TunableParam("SPECIALIZE_K", (False, True), False, Binding.SPECIALIZE, arg="k")
    sized = dataclasses.replace(space, params=(*space.params, size, zero))
    spec = dataclasses.replace(spec, args=(*spec.args, ArgSpec("k", "int32", value="0")))
    plain = [Config.of({**sized.default(), VARIANT: v}) for v in (0, 1, 2)]
    specialised = [Config.of({**c, "SPECIALIZE_N": True}) for c in plain]
    check = Feasibility(sized, spec, LIMITS)
    assert variant_seeds(check) == [*plain[1:], *specialised]
    assert "SPECIALIZE_K: k is 0 for size" in (check.violation(Config.of({**plain[0], "SPECIALIZE_K": True})) or "")


def test_a_variant_is_seeded_at_its_own_parameters_try_first_values() -> None:
    # ROUNDS is variant 1's own (held at 0 elsewhere), and 0 runs the kernel as written: its first try is 4
    rounds = TunableParam("ROUNDS", (0, 2, 4, 8), 0, try_first=4)
    space = dataclasses.replace(SPACE, params=(*SPACE.params, TunableParam(VARIANT, (0, 1, 2), 0), rounds))
    spec = dataclasses.replace(SPEC, constraints=(*SPEC.constraints, "VARIANT == 1 or ROUNDS == 0"))
    default = space.default()
    at_defaults = [Config.of({**default, VARIANT: v}) for v in (1, 2)]
    first = [Config.of({**default, VARIANT: 1, "ROUNDS": 4}), at_defaults[1]]
    assert variant_seeds(Feasibility(space, spec, LIMITS)) == first
    # where its try_first value is infeasible, the variant is seeded at its defaults
    capped = dataclasses.replace(spec, constraints=(*spec.constraints, "ROUNDS * THREADS <= 512"))
    assert variant_seeds(Feasibility(space, capped, LIMITS)) == at_defaults
    # two own parameters (a chained variant's): each at its first try where that stays feasible, the other kept
    items = TunableParam("ITEMS", (1, 2, 4), 1, try_first=4)
    chained = dataclasses.replace(space, params=(*space.params, items))
    both = dataclasses.replace(capped, constraints=(*capped.constraints, "VARIANT == 1 or ITEMS == 1"))
    assert variant_seeds(Feasibility(chained, both, LIMITS))[0] == Config.of(
        {**chained.default(), VARIANT: 1, "ITEMS": 4}
    )
    # a first try feasible only beside another's, whichever comes first in the space: both taken (fewer threads a
    # row than a warp, where a block holds several rows)
    threads = TunableParam("THREADS_R", (16, 32), 32, try_first=16)
    grouped = dataclasses.replace(space, params=(*space.params[:-1], threads, dataclasses.replace(rounds, name="ROWS")))
    warps = dataclasses.replace(
        SPEC,
        constraints=(
            *SPEC.constraints,
            "VARIANT == 1 or THREADS_R == 32",
            "VARIANT == 1 or ROWS == 0",
            "VARIANT != 1 or THREADS_R * max(ROWS, 1) >= 32",
        ),
    )
    assert variant_seeds(Feasibility(grouped, warps, LIMITS))[0] == Config.of(
        {**grouped.default(), VARIANT: 1, "THREADS_R": 16, "ROWS": 4}
    )
    # a parameter that is not a variant's own keeps its default in every seed, try_first or not
    shared = dataclasses.replace(space, params=(*space.params[:-1], dataclasses.replace(rounds, name="OTHER")))
    assert variant_seeds(Feasibility(shared, SPEC, LIMITS)) == [
        Config.of({**shared.default(), VARIANT: v}) for v in (1, 2)
    ]


def test_the_best_is_carried_over_to_the_variants_that_share_its_own_parameters() -> None:
    # variant 1 owns THREADS_A; variant 2 (chained onto 1) owns it too and ROWS, whose first try is 4; variant 3 owns
    # neither: a move from the best of variant 1 keeps its THREADS_A and tries ROWS at 4, and none goes to variant 3
    threads = TunableParam("THREADS_A", (32, 64, 128), 128, try_first=64)
    rows = TunableParam("ROWS", (1, 2, 4), 1, try_first=4)
    other = TunableParam("OTHER", (1, 2), 1, try_first=2)
    space = dataclasses.replace(
        SPACE, params=(*SPACE.params, TunableParam(VARIANT, (0, 1, 2, 3), 0), threads, rows, other)
    )
    spec = dataclasses.replace(
        SPEC,
        constraints=(
            *SPEC.constraints,
            "VARIANT == 1 or VARIANT == 2 or THREADS_A == 128",
            "VARIANT == 2 or ROWS == 1",
            "VARIANT == 3 or OTHER == 1",
        ),
    )
    check = Feasibility(space, spec, LIMITS)
    best = Config.of({**space.default(), VARIANT: 1, "THREADS_A": 32, "VEC": 4})
    assert variant_moves(check, best) == [Config.of({**best, VARIANT: 2, "ROWS": 4})]
    # back from the chained variant: its own ROWS returns to its default, the shared THREADS_A stays
    chained = Config.of({**best, VARIANT: 2, "ROWS": 2})
    assert variant_moves(check, chained) == [best]
    # a move the constraints forbid is not proposed
    capped = Feasibility(space, dataclasses.replace(spec, constraints=(*spec.constraints, "ROWS * VEC <= 8")), LIMITS)
    assert variant_moves(capped, best) == [Config.of({**best, VARIANT: 2})]
    assert variant_moves(CHECK, SPACE.default()) == []  # no variants


def test_objectives_are_relative_to_the_original_on_the_measuring_workers_own_device(options: TuneOptions) -> None:
    """A worker on a GPU 10% slower than the one that measured the original: its trials are not 10% worse."""
    fast = FakeBackend(noise=0.0)
    search(fast, options, budget=Budget(trials=10), sampler="random")
    slow = FakeBackend(noise=0.0, time_of=lambda config, size: 1.1 * table_time(config, size))
    outcome, _ = search(slow, options, budget=Budget(trials=20), sampler="random")
    assert slow.calls[0] == SPACE.default()  # its own baseline first
    theirs = {r.config: r.objective for r in outcome.records if r.ok}
    for config in slow.calls[1:]:
        original = table_time(SPACE.default(), {"N": 1})  # any size: the table's factors do not depend on it
        expected = table_time(config, {"N": 1}) / original
        assert theirs[config] == pytest.approx(expected)


def test_the_best_configurations_neighbours_are_probed_between_the_samplers_turns(
    options: TuneOptions, caplog: pytest.LogCaptureFixture
) -> None:
    backend = FakeBackend()
    with caplog.at_level("INFO", logger="cutune.tune.search"):
        outcome, _ = search(backend, options, budget=Budget(trials=20), sampler="tpe")
    default = SPACE.default()
    first = {c for c in neighbours(default, SPACE) if CHECK.violation(c) is None}
    # right after the original: every feasible neighbour of it (19 trials left: at most 9 in a round)
    assert set(backend.calls[1 : 1 + len(first)]) == first and len(first) == 4
    rounds = [r for r in caplog.records if r.getMessage().startswith("probing")]
    assert len(rounds) >= 2  # a second round, around the best after the sampler's turn
    # the steps lead to the table's optimum (VEC 4, UNROLL 2) within the budget
    best = min((r for r in outcome.records if r.ok), key=lambda r: r.objective or 9)
    assert best.config["VEC"] == 4 and best.config["UNROLL"] == 2 and len(set(backend.calls)) == 20


def test_without_probes_the_sampler_proposes_everything(options: TuneOptions, caplog: pytest.LogCaptureFixture) -> None:
    job = make_job()
    backend = FakeBackend()
    backend.open(job)
    study = open_study(study_key(job, DEVICE), options.storage())
    with caplog.at_level("INFO", logger="cutune.tune.search"):
        run_search(study, backend, CHECK, None, Budget(12), SearchOptions(sampler="tpe", seed=1, probe=False))
    assert len(backend.calls) == 12 and not [r for r in caplog.records if r.getMessage().startswith("probing")]


def test_a_small_budget_leaves_no_room_for_probes(options: TuneOptions, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="cutune.tune.search"):
        search(FakeBackend(), options, budget=Budget(trials=4), sampler="tpe")
    assert not [r for r in caplog.records if r.getMessage().startswith("probing")]  # 3 left after the original


def _variant_space() -> tuple[Feasibility, object]:
    """The fake kernel with two variants, each owning a parameter of eight values pinned to its default elsewhere (as
    `combine` pins a variant's own parameters): of the 13,824 points 935 are feasible."""
    space = dataclasses.replace(
        SPACE,
        params=(
            *SPACE.params,
            TunableParam(VARIANT, (0, 1, 2), 0),
            TunableParam("A_DIV", tuple(range(1, 9)), 1),
            TunableParam("B_DIV", tuple(range(1, 9)), 1),
        ),
        constraints=("VARIANT == 1 or A_DIV == 1", "VARIANT == 2 or B_DIV == 1"),
    )
    return Feasibility(space, SPEC, LIMITS), make_job(space=space)


def test_the_pins_of_each_variant_are_read_from_the_constraints() -> None:
    check, _ = _variant_space()
    assert check.pinned(VARIANT) == {0: {"A_DIV", "B_DIV"}, 1: {"B_DIV"}, 2: {"A_DIV"}}
    assert check.pinned("VEC") == {1: set(), 2: set(), 4: set(), 8: set()}  # no constraint pairs VEC with another
    assert CHECK.pinned(VARIANT) == {}  # no such parameter
    # a constraint that cannot be evaluated at some value (a division by zero) holds nowhere there, and raises nothing
    zero = dataclasses.replace(
        check.space,
        params=(*check.space.params, TunableParam("STEP", (0, 1, 2), 1)),
        constraints=(*check.space.constraints, "VARIANT == 2 or 4 % STEP == 0"),
    )
    assert Feasibility(zero, SPEC, LIMITS).pinned(VARIANT)[1] == {
        "B_DIV"
    }  # STEP 0 and 1, 2 all ok or failing: not a pin


def test_the_sampler_never_proposes_another_variants_own_parameters(options: TuneOptions) -> None:
    # a plain random draw sets A_DIV or B_DIV off its default where that variant does not run nine times in ten
    check, job = _variant_space()
    backend = FakeBackend()
    backend.open(job)  # type: ignore[arg-type]
    study = open_study(study_key(job, DEVICE), options.storage())  # type: ignore[arg-type]
    outcome = run_search(study, backend, check, None, Budget(30), SearchOptions(sampler="tpe", seed=1, probe=False))
    assert len(backend.calls) == 30 and outcome.stop is StopReason.BUDGET
    assert not [r for r in outcome.records if r.failure is Failure.INFEASIBLE and "DIV" in (r.detail or "")]
    # and the owned parameters are searched where their variant runs
    assert {c["A_DIV"] for c in backend.calls if c[VARIANT] == 1} - {1} and {c["B_DIV"] for c in backend.calls} - {1}


def test_a_variant_space_is_enumerated_variant_by_variant() -> None:
    check, _ = _variant_space()
    space = check.space
    # 13,824 points in all, 72 * (1 + 8 + 8) = 1,224 to try: under a budget of 1,300 listed, in the product's order
    every = [
        Config.of(dict(zip([p.name for p in space.params], v, strict=True)))
        for v in itertools.product(*(p.values for p in space.params))
    ]
    assert feasible_configs(space, SPEC, LIMITS, budget=1300) == tuple(c for c in every if check.violation(c) is None)
    assert feasible_configs(space, SPEC, LIMITS, budget=1200) is None


def test_after_the_best_the_fastest_at_each_size_is_probed(
    options: TuneOptions, caplog: pytest.LogCaptureFixture
) -> None:
    """Wider packs halve the small size's time and triple the large one's: the original stays best overall, but a
    per-size dispatch would launch VEC 2 at the small size, so its neighbours are tried too."""

    def time_of(config: Mapping[str, object], size: Mapping[str, int]) -> float:
        vec = 1.0 if config["VEC"] == 1 else 0.5 if size["N"] == 1 << 20 else 3.0
        other = 1.0 if (config["THREADS"], config["UNROLL"]) == (256, 1) else 1.05
        return BASE_US[size["N"]] * vec * other

    backend = FakeBackend(noise=0.0, time_of=time_of)
    with caplog.at_level("INFO", logger="cutune.tune.search"):
        search(backend, options, budget=Budget(trials=14), sampler="tpe")
    rounds = [r.getMessage() for r in caplog.records if r.getMessage().startswith("probing")]
    assert "of the best configuration so far: THREADS=256, UNROLL=1, VEC=1" in rounds[0]
    assert "of the fastest at size 0: THREADS=256, UNROLL=1, VEC=" in rounds[1]


def test_every_other_round_probes_the_best_of_another_variant(
    options: TuneOptions, caplog: pytest.LogCaptureFixture
) -> None:
    """Variant 1 beats the original at any A_DIV; variant 2 loses to it at its first B_DIV and wins by far three steps
    away (B_DIV 4), as a variant may once its block holds fewer threads: a round goes to variant 2's best while it is
    not the best so far, and the steps reach its optimum."""

    def time_of(config: Mapping[str, object], size: Mapping[str, int]) -> float:
        div = int(config["B_DIV"])  # type: ignore[call-overload]
        factor = {0: 1.0, 1: 0.8, 2: 0.9 - 0.12 * (min(div, 4) - 1) + 0.12 * max(div - 4, 0)}[config[VARIANT]]  # type: ignore[index]
        return table_time(config, size) * factor

    check, job = _variant_space()
    backend = FakeBackend(noise=0.0, time_of=time_of)
    backend.open(job)  # type: ignore[arg-type]
    study = open_study(study_key(job, DEVICE), options.storage())  # type: ignore[arg-type]
    with caplog.at_level("INFO", logger="cutune.tune.search"):
        outcome = run_search(study, backend, check, None, Budget(30), SearchOptions(sampler="tpe", seed=1))
    rounds = [r.getMessage() for r in caplog.records if r.getMessage().startswith("probing")]
    assert any("of the best of variant 2:" in r for r in rounds)
    best = min((r for r in outcome.records if r.ok), key=lambda r: r.objective or 9)
    assert best.config[VARIANT] == 2 and best.config["B_DIV"] == 4
