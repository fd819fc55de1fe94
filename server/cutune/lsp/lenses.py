"""Code lenses above each kernel: Templatize, Autotune, Capture launches, the stored result with Apply, or Cancel."""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types

from cutune.lsp import describe
from cutune.lsp.convert import line_range
from cutune.tune.result import TuneResult

TEMPLATIZE = "cutune.templatize"
AUTOTUNE = "cutune.autotune"
APPLY = "cutune.apply"
CANCEL = "cutune.cancel"
SHOW_RESULTS = "cutune.showResults"
CAPTURE = "cutune.capture"


@dataclass(frozen=True)
class KernelLensState:
    """What the lenses of one kernel depend on."""

    name: str
    line: int  # where its definition starts (zero-based)
    templatized: bool
    result: TuneResult | None
    stale: bool
    applied: bool  # the source holds the tuned configuration already
    tuning: bool  # an autotune job for it is queued or running
    has_spec: bool = True  # its spec file has a table for it


def kernel_lenses(uri: str, state: KernelLensState) -> list[types.CodeLens]:
    """The lenses of one kernel, left to right."""
    titles: list[tuple[str, str]] = []
    if state.tuning:
        titles.append(("⏳ autotuning… · Cancel", CANCEL))
    elif state.result is not None:
        applicable = state.result.significant and not state.applied
        command = AUTOTUNE if state.stale else APPLY if applicable else SHOW_RESULTS
        titles.append((describe.lens_title(state.result, state.stale, state.applied), command))
    if not state.templatized:
        titles.append(("Templatize", TEMPLATIZE))
    if not state.tuning and not (state.result is not None and state.stale):
        titles.append(("Autotune", AUTOTUNE))
    if not state.has_spec and not state.tuning:  # the spec comes best from the launches a real program makes
        titles.append(("Capture launches…", CAPTURE))
    arguments = [{"uri": uri, "kernel": state.name}]
    return [
        types.CodeLens(
            range=line_range(state.line), command=types.Command(title=title, command=command, arguments=arguments)
        )
        for title, command in titles
    ]
