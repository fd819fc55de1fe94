"""Line edits: the fewest whole-line edits that turn one text into another, as an editor applies them."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.workspace import TextDocument

from cutune.lsp.convert import line_edits


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    doc = TextDocument("file:///x.cu", text)
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        doc.apply_change(types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text))
    return doc.source


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("a\nb\nc\n", "a\nB\nc\n"),
        ("a\nb\nc\n", "x\na\nb\nc\ny\n"),
        ("a\nb\nc", "a\nb\nC"),  # no newline at the end
        ("a\nb", "a\nb\nc\n"),
        ("µ = 1;\n𝔸 = 2;\nz\n", "µ = 1;\n𝔸 = 3;\nz\n"),  # UTF-16 positions
        ("", "new file\n"),
    ],
)
def test_line_edits_turn_old_into_new(old: str, new: str) -> None:
    assert _apply(old, line_edits(old, new)) == new


def test_only_changed_lines_are_replaced() -> None:
    old = "".join(f"line {i}\n" for i in range(100))
    edits = line_edits(old, old.replace("line 50\n", "line fifty\n"))
    assert [(e.range.start.line, e.range.end.line, e.new_text) for e in edits] == [(50, 51, "line fifty\n")]
