"""The variants the autotune use case searches (workflow/variants.py): whether a run searches the
variants, storing them with the study, and which variant each size runs."""

from __future__ import annotations

import json
from pathlib import Path

import optuna

from cutune.project import open_kernel
from cutune.template.variants import VARIANT
from cutune.workflow.variants import searches_variants, store_variants, variant_names, variants_of, with_combined
from tests.agent.builders import dispatch_result
from tests.template.variants.test_apply_dispatch import _number

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "benchmarks" / "results" / "recordings"


def _recording(tmp_path: Path, params: dict[str, list[int]]) -> Path:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"type": "header", "format": 1, "kernel": "k", "params": params, "device": {}}) + "\n")
    return path


def test_replay_searches_variants_by_default_only_where_the_recording_did(tmp_path: Path) -> None:
    assert searches_variants(None, None)  # measuring: on
    assert not searches_variants(None, RECORDINGS / "silu_and_mul.tune.NVIDIA-H200.2026-11-21.jsonl")
    assert searches_variants(None, _recording(tmp_path, {"BLOCK": [128, 256], VARIANT: [0, 1, 2]}))
    assert not searches_variants(None, _recording(tmp_path, {"BLOCK": [128, 256]}))
    assert not searches_variants(False, None) and searches_variants(True, _recording(tmp_path, {}))


def test_variants_are_stored_with_the_study_once(tmp_path: Path) -> None:
    ctx = open_kernel(ROOT / "samples" / "rms_norm.cu", "rms_norm_kernel")
    combined = variants_of(ctx)
    assert combined.variants
    url = f"sqlite:///{tmp_path / 's.db'}"
    optuna.create_study(study_name="s", storage=url)
    assert store_variants(url, "s", combined.variants) is None  # stored now
    again = store_variants(url, "s", combined.variants[:1])  # a resumed run: the study keeps its first ones
    assert again is not None and [v.name for v in again] == [v.name for v in combined.variants]
    assert again[0].body == combined.variants[0].body


def test_each_size_names_its_variant() -> None:
    ctx = open_kernel(ROOT / "samples" / "rms_norm.cu", "rms_norm_kernel")
    combined = variants_of(ctx)
    searched = with_combined(ctx, combined)
    assert VARIANT in {p.name for p in searched.space.params} and searched.spec is combined.spec
    k = _number(searched, "row_reduce")
    result = dispatch_result(searched, [{}, {}, {}, {VARIANT: k}, {VARIANT: k}, {VARIANT: k}, {VARIANT: k}])
    assert variant_names(result, combined.variants) == ["original"] * 3 + ["row_reduce"] * 4
