"""Core types → LSP types: positions, ranges, text edits, workspace edits."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

from lsprotocol import types

from cutune.cuda.text import Position, Span

DocumentChange = types.TextDocumentEdit | types.CreateFile


def lsp_position(position: Position) -> types.Position:
    """An LSP position (the core already counts UTF-16 code units)."""
    return types.Position(line=position.line, character=position.character)


def lsp_range(span: Span) -> types.Range:
    """The LSP range of a span."""
    return types.Range(start=lsp_position(span.start), end=lsp_position(span.end))


def line_range(line: int) -> types.Range:
    """The start of a zero-based line (for diagnostics on a line whose columns are unknown)."""
    return types.Range(start=types.Position(line=line, character=0), end=types.Position(line=line, character=0))


def line_edits(old: str, new: str) -> list[types.TextEdit]:
    """The fewest whole-line edits that turn `old` into `new` (not one whole-document replace)."""
    before = old.splitlines(keepends=True)
    after = new.splitlines(keepends=True)
    # the lines both texts begin and end with are left out of the diff: a rewrite of one kernel in a large
    # file differs in a few lines, and difflib's cost grows with the product of the lines it compares
    head = 0
    while head < min(len(before), len(after)) and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < min(len(before), len(after)) - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    matcher = difflib.SequenceMatcher(
        a=before[head : len(before) - tail], b=after[head : len(after) - tail], autojunk=False
    )
    return [
        types.TextEdit(
            range=types.Range(start=_line_start(before, head + i1), end=_line_start(before, head + i2)),
            new_text="".join(after[head + j1 : head + j2]),
        )
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def _line_start(lines: Sequence[str], index: int) -> types.Position:
    """The position where line `index` starts; past an unterminated last line, that line's end."""
    if index == len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
        last = lines[-1]
        return types.Position(line=index - 1, character=len(last.encode("utf-16-le")) // 2)
    return types.Position(line=index, character=0)


def document_edit(uri: str, version: int | None, edits: Sequence[types.TextEdit]) -> types.TextDocumentEdit:
    """Edits to one document, refused by the editor when the document is no longer at `version`."""
    return types.TextDocumentEdit(
        text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
        edits=list(edits),
    )


def new_file(uri: str, text: str) -> list[DocumentChange]:
    """Create a file and write `text` into it, in one workspace edit."""
    start = types.Position(line=0, character=0)
    return [
        types.CreateFile(uri=uri, options=types.CreateFileOptions(ignore_if_exists=True)),
        document_edit(uri, None, [types.TextEdit(range=types.Range(start=start, end=start), new_text=text)]),
    ]


def append_to(uri: str, old: str, text: str) -> types.TextDocumentEdit:
    """Append `text` (after a blank line) to an existing document whose text is `old`."""
    end = _line_start(old.splitlines(keepends=True), len(old.splitlines()))
    prefix = "" if not old else "\n" if old.endswith("\n") else "\n\n"  # a blank line between tables
    return document_edit(uri, None, [types.TextEdit(range=types.Range(start=end, end=end), new_text=prefix + text)])


def path_uri(path: Path) -> str:
    """The file URI of a path."""
    return path.resolve().as_uri()
