"""When the held-out rounds may stop: once the rounds left cannot change a verdict."""

from __future__ import annotations

from cutune.gpu.backend import Timing
from cutune.template.model import Config
from cutune.tune.held_out import decided
from cutune.tune.select import Contender, Rounds, Verdict

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
