"""Hover on a tunable parameter (its candidates, the tuned value per size, how much it mattered), and on a
tuned kernel's name (its per-size result)."""

from __future__ import annotations

import re

from lsprotocol import types

from cutune.cuda.text import LineIndex, Position
from cutune.errors import CutuneError
from cutune.lsp import describe
from cutune.lsp.analysis import DocumentAnalysis
from cutune.lsp.convert import lsp_range

_IDENTIFIER = re.compile(rb"[A-Za-z_]\w*")


def hover(analysis: DocumentAnalysis, position: types.Position) -> types.Hover | None:
    """The parameter under the cursor, inside its kernel or its kernel's tuning struct."""
    view = analysis.view_at(position.line)
    word = _word_at(analysis.model.text, position)
    if view is None or word is None:
        return None
    if word[0] == view.name and view.result is not None:  # the per-size picture
        text = describe.result_markdown(view.result, view.stale)
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text), range=word[1])
    try:
        param = analysis.context(view.name).space.param(word[0])
    except (CutuneError, KeyError):
        return None
    text = describe.param_markdown(param, view.result, view.stale)
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text), range=word[1])


def _word_at(text: str, position: types.Position) -> tuple[str, types.Range] | None:
    """The identifier at an LSP position, and its range."""
    data = text.encode("utf-8")
    index = LineIndex(data)
    offset = index.offset(Position(position.line, position.character))
    line_start = data.rfind(b"\n", 0, offset) + 1
    line_end = data.find(b"\n", offset)
    for m in _IDENTIFIER.finditer(data, line_start, len(data) if line_end < 0 else line_end):
        if m.start() <= offset <= m.end():
            return m.group().decode(), lsp_range(index.span(m.start(), m.end()))
    return None
