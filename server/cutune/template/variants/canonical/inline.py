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


def inline_looping_helpers(model: SourceModel, kernel: str) -> SourceModel | str | None:
    """The model with `kernel`'s calls of looping helpers inlined; why none could be; None when it calls none."""
    body, data = kernel_body(model, kernel), model.text.encode("utf-8")
    texts = {
        f.name: data[f.span.start_byte : f.span.end_byte].decode("utf-8", errors="replace")
        for f in model.device_functions
    }
    looping = {name for name, text in texts.items() if _LOOP.search(text)}
    while grown := {n for n, t in texts.items() if n not in looping and any(_calls(t, m) for m in looping)}:
        looping |= grown  # a helper calling a looping helper: inlined, the loop reaches the kernel
    if not any(_calls(body, name) for name in looping):
        return None
    inlined = inline_helpers(model, kernel, looping=True)
    if inlined.calls:
        return inlined.model
    return "; ".join(inlined.refusals) if inlined.refusals else None


def _calls(text: str, name: str) -> bool:
    """Whether `text` calls `name` (`name(` or `name<`)."""
    return re.search(rf"\b{re.escape(name)}\s*[(<]", text) is not None
