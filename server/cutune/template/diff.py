"""Diffs of a rewritten source against the original that cost the changed region, not the whole file."""

from __future__ import annotations

import difflib
import re

_HUNK = re.compile(r"^@@ -(\d+)((?:,\d+)?) \+(\d+)((?:,\d+)?) @@")
_CONTEXT = 3  # lines of context around each hunk, as `diff -u`


def common_ends(a: list[str], b: list[str]) -> tuple[int, int]:
    """How many lines the two texts share at their start, and then at their end."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return head, tail


def unified_diff(before: str, after: str, name: str) -> str:
    """`diff -u a/name b/name` of two texts. Recipes change a few regions of a file: only the lines between
    the first and last change are diffed (a whole 50,000-line file took a second), with context kept."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    head, tail = common_ends(a, b)
    start, cut = max(0, head - _CONTEXT), max(0, tail - _CONTEXT)
    lines = difflib.unified_diff(a[start : len(a) - cut], b[start : len(b) - cut], f"a/{name}", f"b/{name}")
    return "".join(_shifted(line, start) for line in lines)


def _shifted(line: str, offset: int) -> str:
    """A hunk header of a diff of slices starting at line `offset`, numbered as lines of the whole texts."""
    match = _HUNK.match(line) if offset else None
    if match is None:
        return line
    old, old_len, new, new_len = match.groups()
    return f"@@ -{int(old) + offset}{old_len} +{int(new) + offset}{new_len} @@" + line[match.end() :]
