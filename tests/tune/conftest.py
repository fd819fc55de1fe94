from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from cutune.tune.options import Budget, SearchOptions, SelectionOptions, TuneOptions


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture
def options(tmp_path: Path) -> TuneOptions:
    """Options storing the study in a fresh workspace."""
    return TuneOptions(
        workspace=tmp_path,
        budget=Budget(trials=100),
        search=SearchOptions(seed=1),
        selection=SelectionOptions(top_k=3, rounds=5),
    )
