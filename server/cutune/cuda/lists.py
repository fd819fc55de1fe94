"""Comma-separated lists in C++ text (call arguments, `dim3(...)`, template arguments), split at their top level."""

from __future__ import annotations

_DEPTH = {"(": 1, ")": -1, "<": 1, ">": -1}


def split_top_level(text: str, brackets: str = "()") -> list[str]:
    """The parts of `text` between commas outside the `brackets` (e.g. "()" or "()<>"), unstripped."""
    depth_of = {ch: _DEPTH[ch] for ch in brackets}
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += depth_of.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]
