"""An edit's analysis made from the last one: only what the edit can have changed is looked at again.

An editor sends one change at a time. When it changed only whitespace and comments, or code inside one kernel's
body (no directive, no launch, no name whose owner decides a literal's kernel), every other kernel is what it
was, at a new place: its view and diagnostics are moved, not rebuilt (on a 200,000-line file, rebuilding them
took seconds). The edited kernel is parsed again alone, from its new text. Kernels with a stored result are
looked at again in any case (whether it is current can depend on any text), and anything else falls back to
a whole analysis: None is returned.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from cutune.cuda.edit import Edit, Overlaps, Shift
from cutune.cuda.model import Kernel, LaunchExtent, TunableLiteral
from cutune.cuda.parse import only_trivia, parse_source
from cutune.cuda.syntax import stoppable
from cutune.cuda.text import Position
from cutune.errors import ParseStopped
from cutune.lsp.analysis import DocumentAnalysis, KernelView, kernel_view, owned_names
from cutune.lsp.diagnostics import (
    LITERAL,
    DocumentDiagnostics,
    Placed,
    literal_diagnostics,
    placed,
    view_diagnostics,
)
from cutune.lsp.worker import Cancelled

_IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def reanalyze(
    previous: DocumentAnalysis,
    diagnostics: DocumentDiagnostics,
    text: str,
    version: int | None,
    stop: Callable[[], bool],
) -> tuple[DocumentAnalysis, DocumentDiagnostics] | None:
    """The analysis and diagnostics of an edited version from those of the version before; None when the edit
    needs a whole analysis. Raises Cancelled once `stop()` says it is no longer wanted."""
    if diagnostics.issues or len(diagnostics.kernels) != len(previous.kernels):
        return None  # a file with syntax errors: an edit can move the regions tree-sitter gives up on
    old, new = previous.model.text.encode("utf-8", errors="replace"), text.encode("utf-8", errors="replace")
    try:
        with stoppable(stop):
            model = parse_source(text, str(previous.path))
    except ParseStopped:
        raise Cancelled(f"analysis of {previous.uri} version {version}") from None
    analysis = DocumentAnalysis(previous.uri, previous.path, version, model)
    edit, trivia = Edit.between(old, new), old == new
    for tried in (edit, Edit.between(old, new, whole_lines=True)):
        if trivia or only_trivia(model, old[tried.start : tried.old_end], tried.start, tried.new_end):
            edit, trivia = tried, True
            break
    try:
        edited = _edited_kernel(previous, edit, old, new, trivia)
        views, found = _moved(analysis, previous, diagnostics, edit, edited, stop)
        analysis.launches = tuple(_launch(e, edit) for e in previous.launches)
    except Overlaps:
        return None
    analysis.kernels = views
    again = {v.name for v in previous.kernels if v.result is not None}
    analysis.moved_from = previous.version, edit, frozenset(again | ({views[edited[0]].name} if edited else set()))
    analysis.owned_names = previous.owned_names | (owned_names(edited[2]) if edited is not None else frozenset())
    return analysis, DocumentDiagnostics((), found)


# the edited kernel: its index in the previous analysis, the kernel as it is now, and its own literals
_Edited = tuple[int, Kernel, tuple[TunableLiteral, ...]]


def _edited_kernel(previous: DocumentAnalysis, edit: Edit, old: bytes, new: bytes, trivia: bool) -> _Edited | None:
    """The kernel an edit changed, parsed again alone; None when it changed none (only whitespace and comments
    between kernels or in a body). Raises Overlaps when the edit may reach further than one kernel (a directive,
    a launch, a name that decides a literal's kernel, code outside any kernel's body)."""
    if trivia:  # in a kernel's head, a comment can change where tree-sitter says the definition begins
        held = [
            i
            for i, v in enumerate(previous.kernels)
            if v.found.span.start_byte + v.shift.bytes < edit.old_end
            and edit.start < v.found.span.end_byte + v.shift.bytes
            and not v.body()[0] < edit.start <= edit.old_end < v.body()[1]
        ]
        if not held:
            return None
    else:
        held = [i for i, v in enumerate(previous.kernels) if v.body()[0] < edit.start and edit.old_end < v.body()[1]]
        lines = (_lines(old, edit.start, edit.old_end), _lines(new, edit.start, edit.new_end))
        if any(b"#" in text for text in lines) or any(
            m.group().decode() in previous.owned_names for text in lines for m in _IDENTIFIER.finditer(text)
        ):
            raise Overlaps(edit)
    if len(held) != 1:
        raise Overlaps(edit)
    index = held[0]
    before = previous.kernels[index].kernel
    start = before.span.start_byte
    line_start = new.rfind(b"\n", 0, start) + 1
    end = edit.offset(before.span.end_byte, end=True)
    fragment = new[line_start:end]
    if new[line_start:start].strip() or b"<<<" in fragment:
        raise Overlaps(edit)
    alone = parse_source(fragment.decode("utf-8", errors="replace"))
    if len(alone.kernels) != 1 or alone.issues or alone.kernels[0].name != before.name:
        raise Overlaps(edit)
    place = Edit.prefix(line_start, Position(before.span.start.line, 0))
    kernel = dataclasses.replace(
        place.kernel(alone.kernels[0]),
        namespace=before.namespace,
        extern_c=before.extern_c or alone.kernels[0].extern_c,
    )
    own = tuple(place.literal(lit) for lit in alone.literals if lit.kernel == kernel.name)
    return index, kernel, own


def _moved(
    analysis: DocumentAnalysis,
    previous: DocumentAnalysis,
    diagnostics: DocumentDiagnostics,
    edit: Edit,
    edited: _Edited | None,
    stop: Callable[[], bool],
) -> tuple[tuple[KernelView, ...], tuple[_Group, ...]]:
    """Each kernel's view and diagnostics, moved; the edited kernel's and those with a result made again."""
    views: list[KernelView] = []
    found: list[_Group] = []
    for i, (view, (own, lines)) in enumerate(zip(previous.kernels, diagnostics.kernels, strict=True)):
        if i % 1024 == 0 and stop():
            raise Cancelled(f"analysis of {analysis.uri} version {analysis.version}")
        if edited is not None and i == edited[0]:
            # its literals written elsewhere (a launch's, a `#define` it alone uses) are where they were, moved
            span = view.kernel.span
            outside = [p for p in _at(own, lines) if p.code == LITERAL and not _within(p, span.start, span.end)]
            struct = edit.type_decl(view.struct) if view.struct is not None else None
            made = kernel_view(analysis, edited[1], struct, view.result)
            again = view_diagnostics(analysis, made) + literal_diagnostics(made, edited[2])
            views.append(made)
            found.append((tuple([placed(d) for d in again] + [_place(p, edit) for p in outside]), 0))
            continue
        first, _ = view.lines()
        if view.found.span.start_byte + view.shift.bytes < edit.start:  # above the edit, or holding it
            moved = view if view.lines()[1] < edit.start_at.line else _view(view, edit.kernel(view.kernel), None, edit)
        else:
            shift = edit.shift(Position(first, 0))
            moved = (
                _view(view, edit.kernel(view.kernel), None, edit) if shift is None else _view(view, None, shift, edit)
            )
        if view.result is not None:  # whether it is current depends on the text it was tuned from
            moved = kernel_view(analysis, moved.kernel, moved.struct, view.result)
            remade = tuple(placed(d) for d in view_diagnostics(analysis, moved))
            found.append((remade + tuple(_place(p, edit) for p in _at(own, lines) if p.code == LITERAL), 0))
        else:
            found.append(_moved_group(own, lines, edit))
        views.append(moved)
    return tuple(views), tuple(found)


_Group = tuple[tuple[Placed, ...], int]


def _view(view: KernelView, kernel: Kernel | None, shift: Shift | None, edit: Edit) -> KernelView:
    """A view moved: its kernel either moved now or shifted when read."""
    struct = edit.type_decl(view.struct) if view.struct is not None else None
    if kernel is not None:
        return KernelView(kernel, struct, view.result, view.stale, view.applied, view.error)
    assert shift is not None
    return KernelView(view.found, struct, view.result, view.stale, view.applied, view.error, view.shift + shift)


def _at(own: tuple[Placed, ...], lines: int) -> list[Placed]:
    """Diagnostics where they are now, from where they were made and how many lines they moved since."""
    if not lines:
        return list(own)
    return [
        Placed(
            Position(p.start.line + lines, p.start.character),
            Position(p.end.line + lines, p.end.character),
            p.code,
            p.rest,
        )
        for p in own
    ]


def _moved_group(own: tuple[Placed, ...], lines: int, edit: Edit) -> _Group:
    """A kernel's diagnostics, moved (a kernel's launches, and their literals, can be anywhere in the file)."""
    if not own:
        return own, lines
    first = min((p.start.line, p.start.character) for p in own)
    last = max((p.end.line, p.end.character) for p in own)
    if last[0] + lines < edit.start_at.line:
        return own, lines
    if first[0] + lines > edit.old_end_at.line:
        return own, lines + edit.lines
    return tuple(_place(p, edit) for p in _at(own, lines)), 0


def _place(p: Placed, edit: Edit) -> Placed:
    start, end = edit.range(p.start, p.end)
    return p if (start, end) == (p.start, p.end) else Placed(start, end, p.code, p.rest)


def _within(p: Placed, start: Position, end: Position) -> bool:
    return (start.line, start.character) <= (p.start.line, p.start.character) and (p.end.line, p.end.character) <= (
        end.line,
        end.character,
    )


def _launch(e: LaunchExtent, edit: Edit) -> LaunchExtent:
    start, end = edit.offset(e.start_byte), edit.offset(e.end_byte, end=True)
    if start == e.start_byte and end == e.end_byte:
        return e
    first = e.first_line if start == e.start_byte else e.first_line + edit.lines
    last = e.last_line if end == e.end_byte else e.last_line + edit.lines
    return LaunchExtent(start, end, first, last, e.kernel)


def _lines(data: bytes, start: int, end: int) -> bytes:
    """The whole lines holding bytes [start, end)."""
    first = data.rfind(b"\n", 0, start) + 1
    last = data.find(b"\n", end)
    return data[first : len(data) if last < 0 else last]
