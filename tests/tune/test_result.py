"""TuneResult: leaving a launch feature's parameter out of every configuration it names."""

from __future__ import annotations

from cutune.template.model import PDL, Binding, Space, TunableParam
from tests.agent.builders import tune_result


def test_without_drops_the_parameter_everywhere_and_keeps_the_rest() -> None:
    space = Space((TunableParam("BLOCK", (128, 256), 256, Binding.LAUNCH), TunableParam(PDL, (False, True), False)))
    result = tune_result(space, significant=True)
    assert PDL in result.original and PDL in result.sizes[0].best_config
    dropped = result.without(PDL)
    configs = [dropped.original, dropped.best, dropped.per_file, *(s.best_config for s in dropped.sizes)]
    assert all(PDL not in c for c in configs)
    assert dropped.best["BLOCK"] == 128 and dropped.speedup == result.speedup
