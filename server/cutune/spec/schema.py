"""The JSON Schema of spec files (packaged as spec/spec.schema.json), for validators and editors."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def spec_schema() -> dict[str, Any]:
    """The spec files' JSON Schema (draft 2020-12), with descriptions for editor completion."""
    text = resources.files("cutune.spec").joinpath("spec.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
