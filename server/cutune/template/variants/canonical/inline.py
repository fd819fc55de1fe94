"""inline: the calls of the file's `__device__` helpers that hold a loop or a block barrier (or call one that does:
a block reduction whose warp shuffles are unrolled, `val += __shfl_xor_sync(~0, val, 16); ...`), written out in
the kernel (templates included: the call's template arguments, function pointers too, replace the helper's
parameters), so the loop transforms see the helper's loop as the kernel's own. `variants/inline.py` does the
writing out and says why a call stays a call.

A helper the file does not define is looked up in the project headers it includes (beside it, then in the include
folders): a block reduction from a project's `common.h` (`blockReduceSum`, a warp butterfly inside) is the
reduction a row transform must see. Its definition is read as if the file held it after its own text (the lines the
refusals name stay the file's); the variant's body, which stands in the original file, reaches the header's other
names (`WARP_SIZE`) through the same include. Only a helper in the kernel's own namespace is taken (both at file scope,
or both in `lightseq::cuda`): in another, which one a call means is a question of lookup this reading does not
answer.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.template.variants.canonical.loop_macros import reached_headers
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.inline import inline_helpers

NAME = "inline_helpers"
# a loop, or a block barrier: a block reduction with its shuffles unrolled is written out as a loop is
_LOOP = re.compile(r"\b(?:for|while|do|__syncthreads)\b")
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*[(<]")  # a name called (`name(` or `name<`)


def inline_looping_helpers(
    model: SourceModel, kernel: str, include_dirs: Sequence[str] = ()
) -> SourceModel | str | None:
    """The model with `kernel`'s calls of looping helpers (the file's, or its project headers') inlined; why none
    could be; None when it calls none."""
    body = kernel_body(model, kernel)
    model = _with_header_helpers(model, kernel, set(_CALLED.findall(body)), tuple(include_dirs))
    data = model.text.encode("utf-8")
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


def _with_header_helpers(
    model: SourceModel, kernel: str, called: set[str], include_dirs: tuple[str, ...]
) -> SourceModel:
    """`model` with the definitions of the helpers `called` (and those they call) that only its project headers
    hold appended after its text; `model` itself where there are none."""
    if '#include "' not in model.text:
        return model
    namespace = model.kernel(kernel).namespace
    own = {f.name for f in model.device_functions} | {k.name for k in model.kernels}
    found: list[tuple[str, str, frozenset[str]]] = []  # the headers' helpers, in the order the file reaches them
    for header in reached_headers(model, include_dirs):
        found += [(name, text, inner) for name, text, inner, where in _helpers(header) if where == namespace]
    wanted = called - own
    while grown := {n for name, _, inner in found if name in wanted for n in inner} - wanted - own:
        wanted |= grown  # a helper's own helpers: the inlining writes them out too
    texts = [text for name, text, _ in found if name in wanted]
    if not texts:
        return model
    held = "\n\n".join(texts)
    held = f"namespace {namespace} {{\n{held}\n}}" if namespace else held
    appended = f"{model.text}\n\n// cutune: helpers from the project headers the file includes\n{held}\n"
    return parse_source(appended, model.path, rewrite=True)


@functools.lru_cache(maxsize=64)
def _helpers(header: str) -> tuple[tuple[str, str, frozenset[str], str], ...]:
    """A header's `__device__` helpers: name, definition text, the names it calls, namespace."""
    parsed = parse_source(header, "header", rewrite=True)
    data = header.encode("utf-8")
    found = []
    for f in parsed.device_functions:
        text = data[f.span.start_byte : f.span.end_byte].decode("utf-8", errors="replace")
        found.append((f.name, text, frozenset(_CALLED.findall(text)), f.namespace))
    return tuple(found)
