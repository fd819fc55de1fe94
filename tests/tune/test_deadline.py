from __future__ import annotations

from cutune.template.model import Config
from cutune.tune.deadline import MIN_ROUNDS, PICK_ROUNDS, PhasePlan, round_evaluations
from cutune.tune.options import SelectionOptions
from cutune.tune.select import select
from tests.tune.fake_backend import SPACE, FakeBackend, make_job

ORIGINAL = SPACE.default()
FAST = Config.of({"THREADS": 256, "VEC": 4, "UNROLL": 1})  # 0.78× at both sizes in the table
OTHERS = [Config.of({**ORIGINAL, "THREADS": t}) for t in (64, 128, 512, 1024)]


def test_the_plan_prices_the_rounds_as_the_selection_runs_them() -> None:
    """What the search keeps back for the selection: PICK_ROUNDS rounds of every finalist (two between original
    runs), then MIN_ROUNDS confirmation rounds of about two configs (A c1 c2 A); a noise-free clear winner
    is confirmed alone (A c A) in exactly those rounds."""
    plan = PhasePlan(SelectionOptions(), sizes=2, sanitizer=False)
    assert plan.picking(5) == PICK_ROUNDS * (5 + 3 + 1)
    assert plan.confirming(5) == MIN_ROUNDS * (2 + 1 + 1)
    assert plan.picking(0) == plan.confirming(0) == 0
    backend = FakeBackend(noise=0.0)
    backend.open(make_job())
    selection = select(backend, ORIGINAL, [FAST, *OTHERS], SelectionOptions())
    assert selection is not None and selection.chosen == (FAST, FAST)
    assert len(backend.calls) == plan.picking(5) + MIN_ROUNDS * round_evaluations(1)
    every = PhasePlan(SelectionOptions(sequential=False), sizes=2, sanitizer=False)
    assert every.picking(5) == 5 * (5 + 3 + 1) and every.confirming(5) == 5 * 4
