"""The packaged JSON Schema: valid, accepts the samples, rejects broken specs, agrees with the loader."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cutune.spec import spec_schema
from cutune.spec.load import ARG_KEYS, KERNEL_KEYS, PARAM_KEYS, TOLERANCE_KEYS
from cutune.template.dtypes import DTYPES
from cutune.template.model import Binding

ROOT = Path(__file__).resolve().parents[2]
SPECS = [
    ROOT / "samples" / "silu_and_mul.tune.toml",
    ROOT / "samples" / "merge_attn_states.tune.toml",
    ROOT / "tests" / "data" / "spec" / "good.tune.toml",
]


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = spec_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_valid_specs_pass(validator: jsonschema.Draft202012Validator, path: Path) -> None:
    assert list(validator.iter_errors(tomllib.loads(path.read_text()))) == []


def _broken(change: str) -> dict[str, Any]:
    data = copy.deepcopy(tomllib.loads(SPECS[1].read_text()))
    kernel = data["kernel"]["merge_attn_states_kernel"]
    if change == "dtype":
        kernel["args"][0]["dtype"] = "float8"
    elif change == "missing grid":
        del kernel["grid"]
    elif change == "shape and value":
        kernel["args"][0]["value"] = "1"
    elif change == "unknown key":
        kernel["blok"] = 128
    elif change == "empty sizes":
        kernel["sizes"] = []
    elif change == "flag without flag":
        kernel["params"]["NUM_THREADS"]["binding"] = "flag"
    return data


@pytest.mark.parametrize(
    "change", ["dtype", "missing grid", "shape and value", "unknown key", "empty sizes", "flag without flag"]
)
def test_broken_specs_fail(validator: jsonschema.Draft202012Validator, change: str) -> None:
    assert list(validator.iter_errors(_broken(change))), change


def test_schema_and_loader_know_the_same_keys_and_values() -> None:
    defs = spec_schema()["$defs"]
    assert set(defs["kernel"]["properties"]) == set(KERNEL_KEYS)
    assert set(defs["arg"]["properties"]) == set(ARG_KEYS)
    assert set(defs["param"]["properties"]) == set(PARAM_KEYS)
    assert set(defs["kernel"]["properties"]["tolerance"]["properties"]) == set(TOLERANCE_KEYS)
    assert defs["dtype"]["anyOf"][0]["enum"] == list(DTYPES)
    assert defs["param"]["properties"]["binding"]["enum"] == [b.value for b in Binding]
    assert all("description" in p for p in defs["kernel"]["properties"].values())
