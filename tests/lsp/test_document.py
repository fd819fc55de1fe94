"""Incremental changes applied from the document's line index: the text LSP's line breaks and units describe."""

from __future__ import annotations

import random
import re

from lsprotocol import types

from cutune.lsp.document import Document, line_starts

BREAK = re.compile(r"\r\n|\r|\n")


def _lines(text: str) -> list[str]:
    """The lines of `text` with their breaks, as LSP numbers them (a last empty line after a final break)."""
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text) + ([""] if BREAK.search(text[-1:] or "x") else [])


def _reference(text: str, change: types.TextDocumentContentChangePartial) -> str:
    """The change applied by counting UTF-16 units along the lines, one character at a time."""
    lines = _lines(text) if text else [""]

    def offset(position: types.Position) -> int:
        if position.line >= len(lines):
            return len(text)
        line = BREAK.sub("", lines[position.line])
        units, column = 0, 0
        while column < len(line) and units < position.character:
            units += 2 if ord(line[column]) > 0xFFFF else 1
            column += 1
        return sum(map(len, lines[: position.line])) + column

    return text[: offset(change.range.start)] + change.text + text[offset(change.range.end) :]


def _change(
    line: int, character: int, end_line: int, end_character: int, text: str
) -> types.TextDocumentContentChangePartial:
    start, end = types.Position(line=line, character=character), types.Position(line=end_line, character=end_character)
    return types.TextDocumentContentChangePartial(range=types.Range(start=start, end=end), text=text)


def test_line_starts_follow_lsp_line_breaks() -> None:
    assert line_starts("a\nb\r\nc\rd").tolist() == [0, 2, 5, 7]
    assert line_starts("a\r\n\n\r").tolist() == [0, 3, 4, 5]
    assert line_starts("é\n😋\n").tolist() == [0, 2, 4]  # code points, not bytes
    assert line_starts("a\fb\x85c").tolist() == [0]  # breaks to str.splitlines, not to LSP


def test_changes_match_a_line_by_line_reference() -> None:
    rng = random.Random(24)
    pieces = ["x", "yz ", "\n", "\r\n", "\r", "é", "😋", "\t"]
    for _ in range(200):
        text = "".join(rng.choices(pieces, k=rng.randrange(0, 40)))
        document = Document("file:///t.cu", source=text, version=1)
        for _ in range(6):
            lines = len(_lines(text)) + 1
            a = (rng.randrange(lines), rng.randrange(6))
            b = max(a, (rng.randrange(a[0], lines + 1), rng.randrange(6)))
            change = _change(*a, *b, "".join(rng.choices(pieces, k=rng.randrange(0, 5))))
            expected = _reference(text, change)
            document.apply_change(change)
            assert document.source == expected, (text, change)
            assert document._starts is not None and document._starts.tolist() == line_starts(expected).tolist()
            text = expected


def test_a_return_and_an_inserted_newline_make_one_break() -> None:
    document = Document("file:///t.cu", source="a\rb\nc", version=1)
    document.apply_change(_change(1, 0, 1, 0, "\n"))  # "a\r" + "\n" + "b\nc": line 1 is now "b"
    document.apply_change(_change(1, 1, 1, 1, "!"))
    assert document.source == "a\r\nb!\nc"
