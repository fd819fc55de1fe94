"""inline: the calls of the file's `__device__` helpers that hold a loop (or call one that does), written out in
the kernel (templates included: the call's template arguments, function pointers too, replace the helper's
parameters), so the loop transforms see the helper's loop as the kernel's own. `variants/inline.py` does the
writing out and says why a call stays a call."""

from __future__ import annotations

import re

from cutune.cuda.model import SourceModel
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.inline import inline_helpers

NAME = "inline_helpers"
_LOOP = re.compile(r"\b(?:for|while|do)\b")
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*[(<]")  # a name called (`name(` or `name<`)


def inline_looping_helpers(model: SourceModel, kernel: str) -> SourceModel | str | None:
    """The model with `kernel`'s calls of looping helpers inlined; why none could be; None when it calls none."""
    body, data = kernel_body(model, kernel), model.text.encode("utf-8")
    calls: dict[str, set[str]] = {}  # by helper name (overloads together): the names it calls
    looping: set[str] = set()
    for f in model.device_functions:
        text = data[f.span.start_byte : f.span.end_byte].decode("utf-8", errors="replace")
        calls.setdefault(f.name, set()).update(_CALLED.findall(text))
        if _LOOP.search(text):
            looping.add(f.name)
    while grown := {name for name, called in calls.items() if name not in looping and called & looping}:
        looping |= grown  # a helper calling a looping helper: inlined, the loop reaches the kernel
    if not looping & set(_CALLED.findall(body)):
        return None
    inlined = inline_helpers(model, kernel, looping=True)
    if inlined.calls:
        return inlined.model
    return "; ".join(inlined.refusals) if inlined.refusals else None
