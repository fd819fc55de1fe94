"""Variants as JSON, for storing them with a study (a study user attribute): each variant's source,
parameters, launch and provenance, readable by people browsing the storage and never code to run.
A resumed run (or a worker on another host) reads back exactly the variants the study searched."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cutune.errors import StudyError
from cutune.template.model import TunableParam
from cutune.template.variants.model import Launch, Provenance, Variant

ATTR = "cutune:variants"  # the study user attribute that holds them


def variants_json(variants: Sequence[Variant]) -> list[dict[str, Any]]:
    """The variants as JSON-ready dicts, in VARIANT order (the first is VARIANT = 1)."""
    return [
        {
            "name": v.name,
            "body": v.body,
            "helpers": v.helpers,
            "params": [p.to_json() for p in v.params],
            "constraints": list(v.constraints),
            "launch": None
            if v.launch is None
            else {"grid": list(v.launch.grid), "block": list(v.launch.block), "shared_mem": v.launch.shared_mem},
            "provenance": {
                "origin": v.provenance.origin,
                "parent": v.provenance.parent,
                "note": v.provenance.note,
                "step": v.provenance.step,
            },
            "instantiation": [list(pair) for pair in v.instantiation],
        }
        for v in variants
    ]


def variants_from_json(data: Sequence[Mapping[str, Any]]) -> tuple[Variant, ...]:
    """The variants `variants_json` wrote; StudyError when the stored attribute is not such a list."""
    try:
        return tuple(
            Variant(
                name=d["name"],
                body=d["body"],
                helpers=d.get("helpers", ""),
                params=tuple(TunableParam.from_json(p) for p in d.get("params", ())),
                constraints=tuple(d.get("constraints", ())),
                launch=None
                if d.get("launch") is None
                else Launch(tuple(d["launch"]["grid"]), tuple(d["launch"]["block"]), d["launch"]["shared_mem"]),
                provenance=Provenance(**d["provenance"]),
                instantiation=tuple((str(p), str(a)) for p, a in d.get("instantiation", ())),
            )
            for d in data
        )
    except (KeyError, TypeError, ValueError) as e:
        raise StudyError(f"the study's stored variants ({ATTR}) cannot be read: {e}") from None
