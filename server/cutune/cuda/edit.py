"""One edit of a text, and the model's parts it moves: what an editor's change leaves in place, at its new place.

An editor sends one change at a time; everything before it keeps its position, and everything after it moves
by the same number of lines (and, on the line where the change ends, of columns). A kernel, literal or type
that the change does not touch is the same part of the model at a new place, without parsing it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from cutune.cuda.model import Kernel, Parameter, TemplateParam, TunableLiteral, TypeDecl
from cutune.cuda.syntax import changed_range
from cutune.cuda.text import Position, Span


class Overlaps(Exception):
    """A span begins or ends inside the text an edit replaced: it cannot be moved, only found again."""


@dataclass(frozen=True, slots=True)
class Edit:
    """The one region in which two texts differ: old bytes [start, old_end) became new bytes [start, new_end)."""

    start: int
    old_end: int
    new_end: int
    start_at: Position  # where the texts begin to differ
    old_end_at: Position  # where the replaced text ended, in the old text
    new_end_at: Position  # where the new text ends, in the new text

    @classmethod
    def between(cls, old: bytes, new: bytes, *, whole_lines: bool = False) -> Edit:
        """The edit that turns `old` into `new` (both UTF-8): the fewest bytes that differ, or those bytes' whole
        lines (the fewest can cut tokens: a line `// b` put above `// a` differs from it in `b\n// ` only)."""
        start, old_end, new_end = changed_range(old, new)
        if whole_lines:
            start = old.rfind(b"\n", 0, start) + 1
            if old_end > 0 and old[old_end - 1] != 0x0A:  # to the end of the line where the replaced text ends
                line_end = old.find(b"\n", old_end)
                grown = (len(old) if line_end < 0 else line_end + 1) - old_end
                old_end, new_end = old_end + grown, new_end + grown
        return cls(start, old_end, new_end, _position(old, start), _position(old, old_end), _position(new, new_end))

    @classmethod
    def prefix(cls, length: int, at: Position) -> Edit:
        """Text of `length` bytes ending at `at`, put before a text: places a fragment's parts in its file."""
        return cls(0, 0, length, Position(0, 0), Position(0, 0), at)

    @property
    def lines(self) -> int:
        """How many lines the text after the edit moved down (negative: up)."""
        return self.new_end_at.line - self.old_end_at.line

    def position(self, p: Position) -> Position:
        """Where a position at or after the replaced text is now."""
        old = self.old_end_at
        if p.line == old.line:
            return Position(self.new_end_at.line, self.new_end_at.character + p.character - old.character)
        return Position(p.line + self.new_end_at.line - old.line, p.character)

    def offset(self, offset: int, *, end: bool = False) -> int:
        """Where a byte offset of the old text is in the new one; raises Overlaps inside the replaced text. A
        start offset where text was inserted moves with what follows; an `end` offset there stays."""
        if (offset > self.old_end) if end else (offset >= self.old_end):
            return offset + self.new_end - self.old_end
        if (offset <= self.start) if end else (offset < self.start):
            return offset
        raise Overlaps(offset)

    def range(self, start: Position, end: Position) -> tuple[Position, Position]:
        """Where a range of positions is now; raises Overlaps when it begins or ends inside the replaced text."""
        return self._moved(start, end=False), self._moved(end, end=True)

    def _moved(self, p: Position, *, end: bool) -> Position:
        at, first, last = (p.line, p.character), self.start_at, self.old_end_at
        if (at > (last.line, last.character)) if end else (at >= (last.line, last.character)):
            return self.position(p)
        if (at <= (first.line, first.character)) if end else (at < (first.line, first.character)):
            return p
        raise Overlaps(p)

    def span(self, s: Span) -> Span:
        """Where a span is now; raises Overlaps when it begins or ends inside the replaced text."""
        start, end = self.offset(s.start_byte), self.offset(s.end_byte, end=True)
        if (start, end) == (s.start_byte, s.end_byte):
            return s
        return Span(start, end, self._moved(s.start, end=False), self._moved(s.end, end=True))

    def kernel(self, k: Kernel) -> Kernel:
        """A kernel the edit did not change, where it is now."""
        return _moved_kernel(k, self.span)

    def type_decl(self, t: TypeDecl) -> TypeDecl:
        """A type declaration where it is now."""
        return replace(t, span=self.span(t.span))

    def literal(self, lit: TunableLiteral) -> TunableLiteral:
        """A tunable literal where it is now."""
        return replace(lit, span=self.span(lit.span))

    def shift(self, p: Position) -> Shift | None:
        """How a part that begins at or after `p`, on a later line than the edit's end, moved; None for a part
        on the edit's lines (its columns may have changed too)."""
        return Shift(self.new_end - self.old_end, self.lines) if p.line > self.old_end_at.line else None


@dataclass(frozen=True, slots=True)
class Shift:
    """Whole lines put in or taken out above a part: its bytes and lines move, its columns stay. Shifts add up,
    so a part far below a run of edits is moved once, when it is read (lsp/incremental.py)."""

    bytes: int
    lines: int

    def __add__(self, other: Shift) -> Shift:
        return Shift(self.bytes + other.bytes, self.lines + other.lines)

    def span(self, s: Span) -> Span:
        """The span moved."""
        b, n = self.bytes, self.lines
        return Span(
            s.start_byte + b,
            s.end_byte + b,
            Position(s.start.line + n, s.start.character),
            Position(s.end.line + n, s.end.character),
        )

    def kernel(self, k: Kernel) -> Kernel:
        """The kernel moved."""
        return k if self == NO_SHIFT else _moved_kernel(k, self.span)


NO_SHIFT = Shift(0, 0)


def _moved_kernel(k: Kernel, move: Callable[[Span], Span]) -> Kernel:
    return Kernel(
        name=k.name,
        params=tuple(Parameter(p.name, p.type, move(p.span)) for p in k.params),
        template_params=tuple(
            TemplateParam(t.kind, t.name, t.type, t.default, move(t.span)) for t in k.template_params
        ),
        launch_bounds=None if k.launch_bounds is None else replace(k.launch_bounds, span=move(k.launch_bounds.span)),
        span=move(k.span),
        name_span=move(k.name_span),
        body_span=move(k.body_span),
        template_span=None if k.template_span is None else move(k.template_span),
        extern_c=k.extern_c,
        has_errors=k.has_errors,
        namespace=k.namespace,
    )


def _position(data: bytes, offset: int) -> Position:
    """The LSP position (line, UTF-16 column) of a byte offset."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    prefix = data[line_start:offset]
    column = len(prefix) if prefix.isascii() else len(prefix.decode("utf-8", errors="replace").encode("utf-16-le")) // 2
    return Position(data.count(b"\n", 0, offset), column)
