"""Variants stored with a study: written as JSON into a real Optuna journal study and read back equal."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import optuna
import pytest

from cutune.agent.record import variant_from_dict, variant_to_dict
from cutune.errors import StudyError
from cutune.project import open_kernel
from cutune.template.model import Binding, TunableParam
from cutune.template.variants import combine_all
from cutune.template.variants.model import Provenance, Variant
from cutune.template.variants.store import ATTR, variants_from_json, variants_json
from cutune.tune.study import load_study

SAMPLES = Path(__file__).resolve().parents[3] / "samples"


def test_variants_survive_a_journal_study_and_read_back_equal(tmp_path: Path) -> None:
    ctx = open_kernel(SAMPLES / "gated_activation.cu", "act_and_mul_kernel")
    variants = combine_all(ctx.template_model, ctx.kernel.name, ctx.template, ctx.spec).variants
    url = f"journal:{tmp_path / 'studies.journal'}"
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "studies.journal"))
    )
    optuna.create_study(study_name="s", storage=storage).set_user_attr(ATTR, variants_json(variants))
    stored = variants_from_json(load_study(url, "s").user_attrs[ATTR])  # a new process would read this
    assert stored == variants and stored[0].provenance.parent == "split"
    with pytest.raises(StudyError, match="cannot be read"):
        variants_from_json([{"name": "x"}])


def test_a_parameter_reads_back_equal_from_the_store_and_the_agents_record_and_from_an_older_record() -> None:
    rounds = TunableParam("ROUNDS", (0, 4, 8), 0, Binding.TEMPLATE, description="rounds kept", try_first=4)
    fast = TunableParam("FAST", (False, True), False, Binding.FLAG, flag="--use_fast_math")
    variant = Variant("cached", "x[0] = 1;", params=(rounds, fast), provenance=Provenance("row_cache"))
    assert variants_from_json(variants_json([variant])) == (variant,)
    assert variant_from_dict(variant_to_dict(variant)) == variant
    # read at one instantiation of a kernel template: apply writes its launch only where that one runs
    at = dataclasses.replace(variant, instantiation=(("kStaged", "true"), ("kCols", "0")))
    assert variants_from_json(variants_json([at])) == (at,) and variant_from_dict(variant_to_dict(at)) == at
    # written before parameters had a description or a first try: read with their defaults
    older = {"name": "ROUNDS", "values": [0, 4, 8], "default": 0, "binding": "template"}
    assert TunableParam.from_json(older) == TunableParam("ROUNDS", (0, 4, 8), 0)
