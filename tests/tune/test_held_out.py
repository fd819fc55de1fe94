"""The held-out check: which sizes it measures, and when its rounds may stop (once the rounds left cannot
change a verdict)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from cutune.gpu.backend import Timing
from cutune.template.model import Binding, Config, Space, TunableParam
from cutune.tune import TuneOptions, tune
from cutune.tune.held_out import decided
from cutune.tune.select import Contender, Rounds, Verdict
from tests.tune.fake_backend import SPACE, SPEC, FakeBackend, make_job, table_time

A, B = Config.of({"V": 1}), Config.of({"V": 2})


def _rounds(per_config: dict[Config, list[list[float]]]) -> Rounds:
    """Rounds whose contenders had these per-size ratios, one list per size."""
    timing = Timing(size={"N": 1}, median_us=1.0, p10_us=1.0, p90_us=1.0, reps=1)
    contenders = tuple(
        Contender(
            config=c,
            timings=(timing,) * len(sizes),
            per_size=tuple(Verdict.of(r) for r in sizes),
            overall=Verdict.of([1.0] * len(sizes[0])),
        )
        for c, sizes in per_config.items()
    )
    return Rounds(original_timings=(timing,), contenders=contenders)


def test_a_majority_of_the_rounds_decides_a_size() -> None:
    settled = decided([A, B], count=5)  # A launches at the first held-out size, B at the second
    split = [0.9, 1.1, 0.9, 1.1]  # where a configuration is not launched, its ratios do not matter
    # A won 3 of 4: the fifth round cannot lift the median of five above 1; B lost 3 of 4: it cannot win
    assert settled(_rounds({A: [[0.9, 1.1, 0.9, 0.9], split], B: [split, [1.1, 0.9, 1.1, 1.1]]})) == {A, B}
    # 2 of 4: the fifth round decides
    assert settled(_rounds({A: [split, split], B: [split, [1.1, 1.1, 1.1, 1.05]]})) == {B}


def test_no_verdict_before_three_rounds_nor_while_any_size_is_open() -> None:
    settled = decided([A, A], count=3)  # A launches at both held-out sizes
    assert settled(_rounds({A: [[0.9, 0.9], [0.9, 0.9]]})) == set()  # two rounds confirm nothing
    assert settled(_rounds({A: [[0.9, 0.9, 0.9], [1.1, 0.9, 1.1]]})) == {A}
    assert decided([A, A], count=7)(_rounds({A: [[0.9, 0.9, 0.9], [1.1, 0.9, 1.1]]})) == set()


def test_held_out_sizes_the_original_launches_are_not_measured(options: TuneOptions) -> None:
    def time_of(config: Config, size: Mapping[str, int]) -> float:  # no gain below 2^21
        return table_time(SPACE.default() if size["N"] < 1 << 21 else config, size)

    spec = dataclasses.replace(SPEC, sizes=({"N": 1 << 20}, {"N": 1 << 22}, {"N": 1 << 24}))
    backend = FakeBackend(time_of=time_of)
    result = tune(make_job(spec=spec), backend, options)
    assert [s.significant for s in result.sizes] == [False, True, True]
    # of the two held-out sizes, the one between 2^20 and 2^22 launches the original: only the other is measured
    held = backend.specs[-1].sizes
    assert len(held) == 1 and 1 << 22 < held[0]["N"] < 1 << 24
    assert [s.size for s in result.held_out] == list(held)


def test_each_configuration_is_measured_only_at_the_held_out_sizes_it_is_launched_at(options: TuneOptions) -> None:
    def time_of(config: Config, size: Mapping[str, int]) -> float:  # 64 threads win below 2^22 only, by 30%
        return table_time(config, size) * (0.7 if (config["THREADS"] == 64) == (size["N"] < 1 << 22) else 1.0)

    spec = dataclasses.replace(SPEC, sizes=({"N": 1 << 20}, {"N": 1 << 22}, {"N": 1 << 24}))
    backend = FakeBackend(time_of=time_of)
    result = tune(make_job(spec=spec), backend, options)
    launched = [s.best_config for s in result.held_out]
    assert len(launched) == 2 and launched[0]["THREADS"] == 64 != launched[1]["THREADS"]
    # only the held-out phase asks for some sizes: there each configuration runs where the dispatch launches it
    asked = {(config, at) for config, at in zip(backend.calls, backend.at, strict=True) if at is not None}
    assert {(launched[0], (0,)), (launched[1], (1,))} <= asked
    assert {at for config, at in asked if config != SPACE.default()} == {(0,), (1,)}


def test_a_held_out_loss_under_other_compile_flags_leaves_the_original_everywhere(options: TuneOptions) -> None:
    """FAST, a -D define, wins both tuned sizes by 30% and loses the held-out size between them: the dispatch cannot
    hand that range back to the original, whose time under FAST=1 (the file's) nobody measured."""
    space = Space((*SPACE.params, TunableParam("FAST", (0, 1), 0, binding=Binding.DEFINE)))

    def time_of(config: Config, size: Mapping[str, int]) -> float:
        gain = 1.3 if size["N"] == 1 << 22 else 0.7
        return table_time(SPACE.default(), size) * (gain if config["FAST"] else 1.0)

    spec = dataclasses.replace(SPEC, sizes=({"N": 1 << 20}, {"N": 1 << 24}))
    result = tune(make_job(spec=spec, space=space), FakeBackend(time_of=time_of), options)
    assert [s.size["N"] for s in result.held_out] == [1 << 22] and result.held_out[0].speedup == 1.0
    assert "the original stands everywhere" in result.held_out_note
    assert result.dispatch is not None and set(result.dispatch.configs) == {result.original}
    assert not any(s.significant for s in result.sizes)
