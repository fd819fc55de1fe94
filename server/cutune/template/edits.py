"""Text edits on a UTF-8 source: what a recipe or an applied configuration changes, by byte range."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cutune.cuda.text import Span, line_index
from cutune.errors import CutuneError


@dataclass(frozen=True, slots=True)
class TextEdit:
    """Replace the text of `span` with `new_text` (an insertion when the span is empty)."""

    span: Span
    new_text: str


def apply_edits(text: str, edits: Iterable[TextEdit]) -> str:
    """The text with non-overlapping edits applied; edits at one position keep their given order."""
    data = text.encode("utf-8")
    ordered = sorted(edits, key=lambda e: (e.span.start_byte, e.span.end_byte))
    pieces: list[bytes] = []
    pos = 0
    for e in ordered:
        if e.span.start_byte < pos:
            raise CutuneError(f"overlapping edits at byte {e.span.start_byte}")
        pieces += [data[pos : e.span.start_byte], e.new_text.encode("utf-8")]
        pos = e.span.end_byte
    pieces.append(data[pos:])
    return b"".join(pieces).decode("utf-8")


class EditList:
    """Collects edits against one text, by byte range."""

    def __init__(self, data: bytes) -> None:
        self._index = line_index(data)
        self.edits: list[TextEdit] = []

    def replace(self, start: int, end: int, new_text: str) -> None:
        """Replace bytes [start, end)."""
        self.edits.append(TextEdit(self._index.span(start, end), new_text))

    def insert(self, at: int, new_text: str) -> None:
        """Insert text before byte `at`."""
        self.replace(at, at, new_text)
