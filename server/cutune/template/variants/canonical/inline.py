"""inline: the calls of the file's `__device__` helpers that hold a loop, written out in the kernel (templates
included: the call's template arguments, function pointers too, replace the helper's parameters), so the
loop transforms see the helper's loop as the kernel's own. `variants/inline.py` does the writing out and says
why a call stays a call."""

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
    looping = [
        f.name
        for f in model.device_functions
        if _LOOP.search(data[f.span.start_byte : f.span.end_byte].decode("utf-8", errors="replace"))
    ]
    if not any(re.search(rf"\b{re.escape(name)}\s*[(<]", body) for name in looping):
        return None
    inlined = inline_helpers(model, kernel, looping=True)
    if inlined.calls:
        return inlined.model
    return "; ".join(inlined.refusals) if inlined.refusals else None
