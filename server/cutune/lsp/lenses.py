"""Code lenses above each kernel: Templatize, Autotune, the stored result with Apply, or Cancel; Capture launches
above the first kernel without a spec."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from lsprotocol import types

from cutune.lsp import describe
from cutune.lsp.worker import Cancelled
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
    # it shows Capture launches…: the document's first kernel without a table in its spec file (a capture writes
    # the spec of every kernel the program launches, so one lens a document offers it; one a kernel was a third of
    # a 200,000-line file's lenses)
    capture: bool = False


KERNEL_BITS, INDEX_BITS = 21, 3  # up to 2,097,152 kernels in a file, 8 lenses a kernel


def lens_key(listed: int, kernel: int, index: int) -> int:
    """A lens's `data`: the number of the list it was sent in, its kernel's place there, its place among the
    kernel's lenses, as one integer (at most 2**53, which an editor's JSON reads exactly)."""
    return ((listed << KERNEL_BITS | kernel) << INDEX_BITS) | index


def lens_place(key: int) -> tuple[int, int, int]:
    """A lens's list number, kernel place and lens index, from its `data` (`lens_key`)."""
    kernels, indices = (1 << KERNEL_BITS) - 1, (1 << INDEX_BITS) - 1
    return key >> (KERNEL_BITS + INDEX_BITS), (key >> INDEX_BITS) & kernels, key & indices


Window = tuple[int, int]  # the first and last line (zero-based) whose kernels get lenses
# a document of more kernels than this gets lenses only near the lines its editors show, where the editor says
# which (`cutune/visibleRanges`): decoding 40,000 lenses took an editor about 100 ms per list at 200,000 lines,
# Python's json and node's JSON.parse alike, while it shows a few dozen
WINDOWED_FROM = 500


VISIBLE_RANGES = "cutune/visibleRanges"  # the editor's notification of the lines it shows (docs/protocol.md)


def shown_lines(params: Any) -> tuple[str | None, list[tuple[int, int]]]:
    """A `cutune/visibleRanges` notification's document and shown lines (first, last); (None, []) when it is not
    one (pygls hands a custom method's params over as they came: a dict, or an object with attributes)."""

    def field(value: Any, name: str) -> Any:
        return value.get(name) if isinstance(value, dict) else getattr(value, name, None)

    uri = field(field(params, "textDocument"), "uri")
    lines = []
    for shown in field(params, "ranges") or ():
        first, last = field(field(shown, "start"), "line"), field(field(shown, "end"), "line")
        if isinstance(first, int) and isinstance(last, int) and 0 <= first <= last:
            lines.append((first, last))
    return (uri, lines) if isinstance(uri, str) else (None, [])


def windowed(kernels: int, window: Window | None) -> Window | None:
    """The window a document of `kernels` kernels gets its lenses in (None: every kernel's)."""
    return window if kernels > WINDOWED_FROM else None


def lenses_json(
    listed: int,
    states: Iterable[KernelLensState],
    stop: Callable[[], bool] = lambda: False,
    window: Window | None = None,
) -> str:
    """The lenses of many kernels as JSON (LSP `CodeLens` objects) without their commands: each has as `data`
    `[key, kernel]` (`lens_key`: the list `listed`, the kernel's place in it, the lens's index; and the kernel's
    name, which the editor's palette commands read to know the kernels without resolving every lens), and
    `codeLens/resolve` gives it its command (`resolved`). An editor resolves only the lenses it shows; with
    their commands, the 60,000 lenses of a 200,000-line file were 14 MB of JSON; like this, about 7 MB.
    Written directly (through lsprotocol and cattrs they took a second); raises Cancelled once `stop()` says.
    With a `window`, only the kernels whose line is in it (their keys keep their places in the whole list)."""
    items = []
    for i, state in enumerate(states):
        if i % 1024 == 0 and stop():
            raise Cancelled(f"lenses of list {listed}")
        if window is not None and not window[0] <= state.line <= window[1]:
            continue
        at = f'{{"line":{state.line},"character":0}}'
        head = f'{{"range":{{"start":{at},"end":{at}}},"data":['
        name = json.dumps(state.name)
        items += [f"{head}{lens_key(listed, i, n)},{name}]}}" for n in range(len(_titles(state)))]
    return f"[{','.join(items)}]"


def resolved(uri: str, state: KernelLensState | None, index: int) -> types.Command:
    """The command of a kernel's `index`-th lens; an empty one when the kernel has no such lens any more (the
    lenses were asked for before an edit: the editor asks again after the refresh that follows)."""
    titles = _titles(state) if state is not None else []
    if state is None or not 0 <= index < len(titles):
        return types.Command(title="", command="")
    title, command = titles[index]
    return types.Command(title=title, command=command, arguments=[{"uri": uri, "kernel": state.name}])


def _titles(state: KernelLensState) -> list[tuple[str, str]]:
    """Each lens's title and command."""
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
    if state.capture and not state.tuning:  # the spec comes best from the launches a real program makes
        titles.append(("Capture launches…", CAPTURE))
    return titles
