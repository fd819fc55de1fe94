from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from cutune.errors import StudyError
from cutune.gpu.backend import Failure
from cutune.template.model import Config
from cutune.tune.deadline import PICK_ROUNDS, round_evaluations
from cutune.tune.options import SelectionOptions
from cutune.tune.search import SearchOutcome, StopReason
from cutune.tune.select import Verdict, measure_rounds, original_noise, select, shortlist, weighted_geomean
from cutune.tune.study import TrialRecord
from tests.tune.fake_backend import SPACE, FakeBackend, make_job, table_time

ORIGINAL = SPACE.default()
FAST = Config.of({"THREADS": 256, "VEC": 4, "UNROLL": 1})  # 0.78× at both sizes in the table
NEARLY = Config.of({"THREADS": 512, "VEC": 1, "UNROLL": 1})  # 0.99×
SMALL_ONLY = Config.of({"THREADS": 128, "VEC": 1, "UNROLL": 1})
LARGE_ONLY = Config.of({"THREADS": 64, "VEC": 1, "UNROLL": 1})
# candidates identical to the original (the time ignores THREADS in `same`)
NOOPS = [Config.of({**ORIGINAL, "THREADS": t}) for t in (64, 128, 512, 1024, 2048)]


def opened(backend: FakeBackend) -> FakeBackend:
    backend.open(make_job())
    return backend


def small_vs_large(config: Config, size: Mapping[str, int]) -> float:
    """SMALL_ONLY is 0.8× at the small size and 1.1× at the large one; LARGE_ONLY the other way round."""
    small = size["N"] == 1 << 20
    gain = {SMALL_ONLY: 0.8 if small else 1.1, LARGE_ONLY: 1.1 if small else 0.8}.get(config, 1.0)
    return table_time(ORIGINAL, size) * gain


def same(config: Config, size: Mapping[str, int]) -> float:
    return table_time(ORIGINAL, size)


def test_verdict_needs_a_gain_beyond_the_spread_and_every_round_for_confirmation() -> None:
    assert Verdict.of([0.80, 0.81, 0.79, 0.80, 0.82]).significant
    assert not Verdict.of([0.97, 1.02, 0.99, 1.01, 0.96]).significant
    assert not Verdict.of([1.05, 1.05, 1.05]).significant
    assert Verdict.of([0.80, 0.81, 0.79, 0.80, 0.82]).confirmed(noise=0.01)
    assert not Verdict.of([0.80, 0.81, 0.79, 0.80, 0.82]).confirmed(noise=0.15)  # within what noise makes
    assert not Verdict.of([0.80, 0.80, 0.80, 0.80, 1.01]).confirmed(noise=0.0)  # lost one round
    # a few-µs size (measured on an H100: ratios 15% apart from round to round): faster in every round counts
    small = Verdict.of([0.75, 0.92, 0.80, 0.95, 0.85])
    assert small.spread > 1.0 - small.ratio and small.significant and small.confirmed(noise=0.02)
    assert not small.confirmed(noise=0.15)  # unless the original itself varies that much


def test_weighted_geomean() -> None:
    assert weighted_geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert weighted_geomean([2.0, 8.0], [2, 1]) == pytest.approx((2.0 * 2.0 * 8.0) ** (1 / 3))


def test_picks_a_clearly_faster_config_and_reports_confirmation_rounds() -> None:
    backend = opened(FakeBackend(noise=0.01))
    every_round = SelectionOptions(rounds=5, confirm_rounds=4, sequential=False)
    selection = select(backend, ORIGINAL, [NEARLY, FAST], every_round)
    assert selection is not None and selection.best is not None
    assert selection.best.config == FAST and selection.chosen == (FAST, FAST) and selection.single == FAST
    assert selection.best.overall.ratio == pytest.approx(0.78, abs=0.02)
    calls = backend.calls
    # selection: 5 rounds of A c A c A, the order rotating; confirmation: 4 rounds of A FAST A
    assert len(calls) == 5 * 5 + 4 * 3
    picking, confirming = calls[:25], calls[25:]
    rounds = [picking[i : i + 5] for i in range(0, 25, 5)]
    assert all(c == ORIGINAL for r in rounds for c in r[0::2])
    assert [r[1] for r in rounds] == [NEARLY, FAST, NEARLY, FAST, NEARLY]
    assert confirming == [ORIGINAL, FAST, ORIGINAL] * 4  # NEARLY lost in selection: not re-measured
    # the reported times are the confirmation rounds' only: 8 original runs and 4 of FAST, 100 reps each
    assert [t.reps for t in selection.original_timings] == [800, 800]
    assert [selection.timing(FAST, i).reps for i in range(2)] == [400, 400]


def test_refuses_a_gain_within_the_noise() -> None:
    backend = opened(FakeBackend(noise=0.02, seed=3))
    selection = select(backend, ORIGINAL, [NEARLY], SelectionOptions(rounds=5))
    assert selection is not None
    assert selection.best is None  # 1% faster in the table, but the run-to-run spread is larger
    assert selection.best_for_size(0) is None and selection.best_for_size(1) is None
    assert selection.chosen == (ORIGINAL, ORIGINAL)


def test_keeps_the_best_config_per_size_and_the_single_best_for_comparison() -> None:
    backend = opened(FakeBackend(noise=0.005, time_of=small_vs_large))
    selection = select(backend, ORIGINAL, [SMALL_ONLY, LARGE_ONLY], SelectionOptions(rounds=4))
    assert selection is not None
    assert selection.chosen == (SMALL_ONLY, LARGE_ONLY)
    assert selection.speedup(SMALL_ONLY, 0) == pytest.approx(1 / 0.8, rel=0.02)
    assert selection.speedup(LARGE_ONLY, 1) == pytest.approx(1 / 0.8, rel=0.02)
    # the single best is one of the two: slower than the original at the other size
    assert selection.single in (SMALL_ONLY, LARGE_ONLY)
    other = 1 if selection.single == SMALL_ONLY else 0
    assert selection.speedup(selection.single, other) == pytest.approx(1 / 1.1, rel=0.02)
    # confirmation: the pick that is not the single best only where it was picked, everything else everywhere
    pick = LARGE_ONLY if selection.single == SMALL_ONLY else SMALL_ONLY
    asked = {(c, at) for c, at in zip(backend.calls, backend.at, strict=True) if at is not None}
    assert asked == {(pick, (other,))}
    confirmed = selection.confirmation.of(pick)
    assert confirmed is not None and [t.size for t in confirmed.timings] == [backend.sizes[other]]


def test_weights_decide_the_single_best() -> None:
    for weights, single in (((4.0, 1.0), SMALL_ONLY), ((1.0, 4.0), LARGE_ONLY)):
        backend = opened(FakeBackend(noise=0.005, time_of=small_vs_large))
        selection = select(backend, ORIGINAL, [SMALL_ONLY, LARGE_ONLY], SelectionOptions(), weights=weights)
        assert selection is not None and selection.single == single


def test_a_tie_within_the_noise_goes_to_the_config_closest_to_the_original() -> None:
    # NEAR changes one parameter of the original, FAR three; FAR is 0.1% faster, FASTER 10% faster
    near = Config.of({**ORIGINAL, "VEC": 4})
    far = Config.of({"THREADS": 512, "VEC": 4, "UNROLL": 2})
    faster = Config.of({"THREADS": 128, "VEC": 8, "UNROLL": 2})

    def time_of(config: Config, size: Mapping[str, int]) -> float:
        gain = {near: 0.800, far: 0.799, faster: 0.72}.get(config, 1.0)
        return table_time(ORIGINAL, size) * gain

    for seed in range(4):
        backend = opened(FakeBackend(noise=0.004, seed=seed, time_of=time_of))
        selection = select(backend, ORIGINAL, [far, near], SelectionOptions())
        assert selection is not None and selection.single == near and selection.chosen == (near, near)
        # UNROLL as a compile flag: the two groups tie too, and the original's flags are kept
        flags = select(backend, ORIGINAL, [far, near], SelectionOptions(), per_file=("UNROLL",))
        assert flags is not None and flags.per_file == Config.of({"UNROLL": 1}) and flags.chosen == (near, near)
    clear = opened(FakeBackend(noise=0.01, time_of=time_of))
    selection = select(clear, ORIGINAL, [near, far, faster], SelectionOptions())
    assert selection is not None and selection.single == faster and selection.chosen == (faster, faster)


def test_a_tie_gives_up_at_most_one_percent_for_a_config_closer_to_the_original() -> None:
    # the original runs alternately 3% slow and 3% fast, so a run against its neighbours varies by 6% and
    # three standard errors would call configs ~19% apart a tie. Each candidate runs between two original
    # runs, so its ratio stays exact: FAR, 3% faster than NEAR, must win; at 0.5% apart the closer one stays.
    near = Config.of({**ORIGINAL, "VEC": 4})
    far = Config.of({"THREADS": 512, "VEC": 4, "UNROLL": 2})
    for far_gain, winner in ((0.776, far), (0.796, near)):
        backend = opened(FakeBackend(noise=0.0))

        def time_of(
            config: Config, size: Mapping[str, int], far_gain: float = far_gain, calls: list[Config] = backend.calls
        ) -> float:
            if config == ORIGINAL:
                return table_time(ORIGINAL, size) * (1.03 if calls.count(ORIGINAL) % 2 else 0.97)
            return table_time(ORIGINAL, size) * {near: 0.800, far: far_gain}[config]

        backend.time_of = time_of
        # 6 rounds, every one: an even count of original runs, so the robust sd sees the alternation
        selection = select(backend, ORIGINAL, [far, near], SelectionOptions(rounds=6, sequential=False))
        assert selection is not None and selection.overall_noise > 0.05
        assert selection.chosen == (winner, winner) and selection.single == winner


def test_a_size_whose_pick_is_not_confirmed_launches_the_single_best_where_that_is() -> None:
    # LUCKY looks 0.7x at the small size while it is picked (the first 10 runs: 2 rounds of A L A S A), then
    # runs as fast as the original; STEADY is 0.8x at both sizes throughout and the single best
    lucky = Config.of({"THREADS": 128, "VEC": 1, "UNROLL": 1})
    steady = Config.of({"THREADS": 256, "VEC": 4, "UNROLL": 1})
    backend = opened(FakeBackend(noise=0.002))

    def time_of(config: Config, size: Mapping[str, int], calls: list[Config] = backend.calls) -> float:
        small = size["N"] == 1 << 20
        picking = len(calls) <= 10
        gain = {lucky: (0.7 if small else 1.1) if picking else 1.0, steady: 0.8}.get(config, 1.0)
        return table_time(ORIGINAL, size) * gain

    backend.time_of = time_of
    selection = select(backend, ORIGINAL, [lucky, steady], SelectionOptions())
    assert selection is not None and selection.single == steady
    assert selection.chosen == (steady, steady)  # not the original at the small size


def test_compile_flags_are_chosen_once_and_what_that_costs_is_said() -> None:
    # UNROLL stands in for a compile flag here: it must take one value for both sizes
    a = Config.of({"THREADS": 128, "VEC": 1, "UNROLL": 2})
    b = Config.of({"THREADS": 64, "VEC": 1, "UNROLL": 1})

    def time_of(config: Config, size: Mapping[str, int]) -> float:
        small = size["N"] == 1 << 20
        gain = {a: 0.80 if small else 0.95, b: 1.0 if small else 0.85}.get(config, 1.0)
        return table_time(ORIGINAL, size) * gain

    backend = opened(FakeBackend(noise=0.003, time_of=time_of))
    selection = select(backend, ORIGINAL, [a, b], SelectionOptions(), per_file=("UNROLL",))
    assert selection is not None
    # per size the free picks would be (a, b); a and b differ in UNROLL, so one group wins: UNROLL=2
    # (a at both sizes: 0.80 · 0.95) beats UNROLL=1 (the original, then b: 1.0 · 0.85)
    assert selection.per_file == Config.of({"UNROLL": 2}) and selection.chosen == (a, a)
    assert selection.per_file_cost == pytest.approx((0.80 * 0.95 / (0.80 * 0.85)) ** 0.5, rel=0.02)
    free = opened(FakeBackend(noise=0.003, time_of=time_of))
    unconstrained = select(free, ORIGINAL, [a, b], SelectionOptions())
    assert unconstrained is not None and unconstrained.chosen == (a, b) and unconstrained.per_file_cost == 1.0


def test_a_candidate_that_fails_now_is_dropped() -> None:
    backend = opened(FakeBackend(failures={FAST: Failure.WRONG}))
    selection = select(backend, ORIGINAL, [FAST, NEARLY], SelectionOptions(rounds=3))
    assert selection is not None
    assert [c.config for c in selection.selection.contenders] == [NEARLY]
    assert backend.calls.count(FAST) == 1  # not retried in later rounds


def test_the_original_failing_is_an_error() -> None:
    backend = opened(FakeBackend(failures={ORIGINAL: Failure.FAULT}))
    with pytest.raises(StudyError, match="re-measuring"):
        select(backend, ORIGINAL, [FAST], SelectionOptions(rounds=3))


def test_rounds_below_three_are_refused() -> None:
    with pytest.raises(StudyError):
        SelectionOptions(rounds=2)
    with pytest.raises(StudyError):
        SelectionOptions(confirm_rounds=2)


@pytest.mark.parametrize(
    "rounds",
    [
        SelectionOptions(),
        SelectionOptions(rounds=3, confirm_rounds=3),
        SelectionOptions(sequential=False),
        SelectionOptions(between=1),
    ],
    ids=str,
)
def test_candidates_identical_to_the_original_win_at_most_1_percent_of_the_time(rounds: SelectionOptions) -> None:
    """The noise simulation: 5 candidates that are the original in disguise, 3% noise per measurement,
    over 1,000 seeds; any size declaring a winner, or a single best confirmed overall, is a false winner."""
    seeds = 1000
    false = 0
    for seed in range(seeds):
        backend = opened(FakeBackend(noise=0.03, seed=seed, time_of=same))
        selection = select(backend, ORIGINAL, NOOPS, rounds)
        assert selection is not None
        false += any(c != ORIGINAL for c in selection.chosen) or selection.best is not None
    assert false / seeds <= 0.01


def test_real_gains_survive_the_same_rules() -> None:
    """The power side of the simulation: a 5% gain at 1% noise is confirmed in nearly every seed."""

    def five_percent(config: Config, size: Mapping[str, int]) -> float:
        return table_time(ORIGINAL, size) * (0.95 if config == SMALL_ONLY else 1.0)

    found = 0
    for seed in range(50):
        backend = opened(FakeBackend(noise=0.01, seed=seed, time_of=five_percent))
        selection = select(backend, ORIGINAL, [SMALL_ONLY, *NOOPS[:2]], SelectionOptions())
        assert selection is not None
        found += selection.chosen == (SMALL_ONLY, SMALL_ONLY)
    assert found >= 45


def test_the_shortlist_brings_each_finalists_twin_with_the_original_flags() -> None:
    """Treating THREADS as a compile flag: a finalist's twin with the original's value joins it, if measured, or if
    measured now and sound."""
    backend = opened(FakeBackend(noise=0.0))
    ranked = [Config.of({**NEARLY, "VEC": 2}), Config.of({**NEARLY, "THREADS": 1024, "VEC": 2}), FAST, SMALL_ONLY]
    twin = Config.of({**NEARLY, "THREADS": ORIGINAL["THREADS"], "VEC": 2})
    records = [
        TrialRecord(n, c, objective, timings=backend.evaluate(c).timings)
        for n, (c, objective) in enumerate(
            [(ORIGINAL, 1.0), *((c, 0.5 + 0.01 * i) for i, c in enumerate(ranked)), (twin, 0.99)]
        )
    ]
    outcome = SearchOutcome(tuple(records), records[0], "random", StopReason.BUDGET, 1.0)
    assert twin not in shortlist(outcome, top_k=2)
    assert twin in shortlist(outcome, top_k=2, per_file=("THREADS",))  # the twin ranked last, still in
    unmeasured = SearchOutcome(tuple(records[:-1]), records[0], "random", StopReason.BUDGET, 1.0)
    assert twin not in shortlist(unmeasured, top_k=2, per_file=("THREADS",))  # never measured: not invented
    asked: list[Config] = []

    def measure(config: Config) -> bool:  # evaluated as a trial would be; here it fails its check
        asked.append(config)
        return False

    assert twin not in shortlist(unmeasured, top_k=2, per_file=("THREADS",), measure=measure)
    assert twin in asked and all(c["THREADS"] == ORIGINAL["THREADS"] for c in asked)  # only twins are asked about
    assert twin in shortlist(unmeasured, top_k=2, per_file=("THREADS",), measure=lambda c: backend.evaluate(c).ok)


def test_sequential_selection_prunes_and_stops_early_with_the_same_picks() -> None:
    """Clearly slower finalists leave after the first rounds and decided ones leave the confirmation: fewer
    evaluations than measuring every round, the same per-size picks."""
    candidates = [FAST, NEARLY, SMALL_ONLY, LARGE_ONLY, *NOOPS[:2]]
    counts = {}
    for sequential in (True, False):
        backend = opened(FakeBackend(noise=0.005, seed=2))
        selection = select(backend, ORIGINAL, candidates, SelectionOptions(sequential=sequential))
        assert selection is not None and selection.chosen == (FAST, FAST) and selection.single == FAST
        counts[sequential] = len(backend.calls)
    # every round: 6 finalists, two between original runs (A c c A c c A c c A), then FAST confirmed (A c A)
    assert counts[False] == 5 * (6 + 3 + 1) + 5 * 3
    assert counts[True] <= 0.6 * counts[False]


def test_selection_rounds_of_four_or_more_run_two_finalists_between_original_runs() -> None:
    """A c1 c2 A c3 c4 A: each finalist's ratio is against the original runs around its pair, so a slow drift
    still cancels (to half a run's drift, alternating in sign as the rotation moves a finalist in its pair)."""
    backend = opened(FakeBackend(noise=0.0))
    four = NOOPS[:4]

    def drifting(config: Config, size: Mapping[str, int], calls: list[Config] = backend.calls) -> float:
        return table_time(ORIGINAL, size) * (1.0 + 0.002 * len(calls))  # 0.2% slower every run, all configs

    backend.time_of = drifting
    rounds = measure_rounds(backend, ORIGINAL, four, 3, between=2)
    assert rounds is not None
    assert backend.calls[:7] == [ORIGINAL, four[0], four[1], ORIGINAL, four[2], four[3], ORIGINAL]
    assert len(backend.calls) == 3 * round_evaluations(4, between=2) == 3 * 7
    # 3 rounds of 7 runs: the drift adds 4% over the run; each ratio is within half a run's drift (0.1%)
    assert all(abs(c.per_size[0].ratio - 1.0) < 0.0012 for c in rounds.contenders)
    assert len(rounds.original_series[0]) == 3 * 3
    # fewer than four finalists keep A c A: their original runs estimate the noise
    assert round_evaluations(3, between=2) == 2 * 3 + 1 and round_evaluations(8, between=2) == 8 + 4 + 1


def test_candidates_run_only_at_their_sizes_and_the_original_at_those_of_its_neighbours() -> None:
    """`at` (the held-out check: a configuration only where it is launched): each candidate is measured at its
    sizes, each original run at the sizes of the candidates on either side, and ratios pair the same sizes."""
    backend = opened(FakeBackend(noise=0.0))
    rounds = measure_rounds(backend, ORIGINAL, [SMALL_ONLY, LARGE_ONLY], 3, at={SMALL_ONLY: [0], LARGE_ONLY: [1]})
    assert rounds is not None
    assert backend.calls[:5] == [ORIGINAL, SMALL_ONLY, ORIGINAL, LARGE_ONLY, ORIGINAL]
    assert backend.at[:5] == [None, (0,), (0, 1), (1,), (1,)]  # the first original run: every size
    small, large = rounds.of(SMALL_ONLY), rounds.of(LARGE_ONLY)
    assert small is not None and large is not None and len(small.timings) == len(large.timings) == 1
    for contender, index in ((small, 0), (large, 1)):
        size = backend.sizes[index]
        expected = table_time(contender.config, size) / table_time(ORIGINAL, size)
        assert contender.verdict(index).ratio == pytest.approx(expected)
        assert contender.timing(index).size == size
    # the original: every size, each from the runs that measured it (2 a round at each size, and the first)
    assert [t.size for t in rounds.original_timings] == list(backend.sizes)
    assert [len(series) for series in rounds.original_series] == [2 * 3, 2 * 3 + 1]


def test_finalists_that_cannot_gain_more_than_one_percent_are_neither_picked_nor_confirmed() -> None:
    """At 0.05% noise, finalists 0.2% faster than the original win every round (picked and confirmed before), yet
    cannot change a speedup by more than 1%: they leave as soon as that is clear, nothing is picked, and the
    confirmation measures no candidate; a finalist 3% faster at one size is still picked and confirmed there."""

    def gains(real: float) -> Callable[[Config, Mapping[str, int]], float]:
        def time_of(config: Config, size: Mapping[str, int]) -> float:
            gain = real if config == SMALL_ONLY and size["N"] == 1 << 20 else 0.998 if config != ORIGINAL else 1.0
            return table_time(ORIGINAL, size) * gain

        return time_of

    for seed in range(5):
        backend = opened(FakeBackend(noise=0.0005, seed=seed, time_of=gains(0.998)))
        selection = select(backend, ORIGINAL, NOOPS, SelectionOptions())
        assert selection is not None and selection.chosen == (ORIGINAL, ORIGINAL) and selection.single is None
        assert selection.confirmation.contenders == ()
        assert len(backend.calls) <= PICK_ROUNDS * round_evaluations(5, between=2) + 1  # the picking rounds, then A
        real = opened(FakeBackend(noise=0.0005, seed=seed, time_of=gains(0.97)))
        found = select(real, ORIGINAL, [SMALL_ONLY, *NOOPS[:4]], SelectionOptions())
        assert found is not None and found.chosen[0] == SMALL_ONLY
        assert found.speedup(SMALL_ONLY, 0) == pytest.approx(1 / 0.97, rel=0.005)


def test_picks_take_two_rounds_and_confirmation_runs_two_candidates_between_original_runs() -> None:
    """Sequential: the picks are made on PICK_ROUNDS rounds (A c1 A c2 A for two finalists); the confirmation
    then runs the pick and the single best between the same two original runs (A c1 c2 A), its noise bound
    pooling the original runs of both phases."""
    backend = opened(FakeBackend(noise=0.002, time_of=small_vs_large))
    selection = select(backend, ORIGINAL, [SMALL_ONLY, LARGE_ONLY], SelectionOptions())
    assert selection is not None and selection.chosen == (SMALL_ONLY, LARGE_ONLY)
    picking = PICK_ROUNDS * round_evaluations(2)
    a, small, large = ORIGINAL, SMALL_ONLY, LARGE_ONLY
    assert backend.calls[:picking] == [a, small, a, large, a, a, large, a, small, a]  # two rounds, rotated
    confirming = backend.calls[picking:]
    assert confirming[0] == confirming[3] == a and {*confirming[1:3]} == {small, large}
    assert len(confirming) % 4 == 0  # whole rounds of A c1 c2 A


def test_the_noise_bound_is_one_standard_error_above_the_estimate() -> None:
    """Confirmation reads the noise one standard error high (a MAD of m log ratios: about 1/sqrt(m) of itself),
    so that a noise estimated low from a few original runs cannot let a no-op change through."""
    backend = opened(FakeBackend(noise=0.03, seed=1, time_of=same))
    rounds = measure_rounds(backend, ORIGINAL, NOOPS[:2], 3)
    assert rounds is not None
    m = len(rounds.original_series[0]) - 2  # log ratios: every original run but the first and the last
    for plain, bound in zip(original_noise(rounds), original_noise(rounds, bound=True), strict=True):
        assert plain > 0 and bound == pytest.approx(plain * (1 + 1 / m**0.5))


def test_a_finalists_twin_is_not_pruned_by_its_own_faster_flag_group() -> None:
    """Treating THREADS as a compile flag: LARGE_FLAGGED wins the large size by far but loses the small one, where
    only the original's flags can launch the original; its twin under the original's flags is 15% slower than it at
    both sizes. The twin must stay through the selection rounds (it is the only way the large size's gain can share
    the file with the original at the small size), so the large size gets it."""
    flagged = Config.of({"THREADS": 64, "VEC": 4, "UNROLL": 1})
    twin = Config.of({**flagged, "THREADS": ORIGINAL["THREADS"]})

    def time(config: Config, size: Mapping[str, int]) -> float:
        small = size["N"] == 1 << 20
        base = table_time(ORIGINAL, size)
        if config["VEC"] == 4:
            return base * (1.3 if small else 0.4) * (0.85 if config["THREADS"] == 64 else 1.0)
        return base * (1.05 if config["UNROLL"] > 1 else 1.0)

    # the finalists of a real search are many (here slower ones under the original's flags): after one round the
    # original's runs between them give a noise, and pruning starts
    others = [Config.of({"THREADS": ORIGINAL["THREADS"], "VEC": v, "UNROLL": u}) for v in (1, 2) for u in (2, 4)]
    backend = opened(FakeBackend(noise=0.003, time_of=time))
    selection = select(backend, ORIGINAL, [flagged, twin, *others], SelectionOptions(), per_file=("THREADS",))
    assert selection is not None
    assert selection.per_file == Config.of({"THREADS": ORIGINAL["THREADS"]})
    assert selection.chosen == (ORIGINAL, twin)
    found = selection.selection.of(twin)
    assert found is not None and found.overall.rounds == PICK_ROUNDS  # never pruned


def _flagged_then_lost(
    flagged: Config, twin: Config
) -> tuple[Callable[[Config, Mapping[str, int]], float], dict[str, int]]:
    """Times where FLAGGED is 0.7× at both sizes in the selection rounds, then loses its gain at the small size (a
    near-tie that does not hold), and its twin is 0.85× everywhere; and how often FLAGGED ran at the small size."""
    seen = {"small": 0}

    def time(config: Config, size: Mapping[str, int]) -> float:
        small = size["N"] == 1 << 20
        base = table_time(ORIGINAL, size)
        if config == flagged:
            seen["small"] += small
            return base * (1.0 if small and seen["small"] > PICK_ROUNDS else 0.7)
        return base * (0.85 if config == twin else 1.0)

    return time, seen


def test_a_size_left_to_the_original_takes_the_file_back_to_the_original_flags() -> None:
    """Treating THREADS as a compile flag: FLAGGED wins both sizes in the selection rounds, then loses its gain at the
    small size. The original would stand there under FLAGGED's flags, a pairing no round measured: the file keeps the
    original's flags, and the twin under them (15% faster everywhere) is chosen; without a finalist under the
    original's flags, the original stands everywhere."""
    flagged = Config.of({"THREADS": 64, "VEC": 4, "UNROLL": 1})
    twin = Config.of({**flagged, "THREADS": ORIGINAL["THREADS"]})
    home = Config.of({"THREADS": ORIGINAL["THREADS"]})
    time, seen = _flagged_then_lost(flagged, twin)
    backend = opened(FakeBackend(noise=0.003, time_of=time))
    selection = select(backend, ORIGINAL, [flagged, twin], SelectionOptions(), per_file=("THREADS",))
    assert selection is not None
    assert seen["small"] > PICK_ROUNDS  # FLAGGED was measured at the small size after it had been picked there
    assert selection.per_file == home and selection.chosen == (twin, twin)
    time, seen = _flagged_then_lost(flagged, twin)
    backend = opened(FakeBackend(noise=0.003, time_of=time))
    alone = select(backend, ORIGINAL, [flagged], SelectionOptions(), per_file=("THREADS",))
    assert alone is not None and seen["small"] > PICK_ROUNDS
    assert alone.per_file == home and alone.chosen == (ORIGINAL, ORIGINAL)
