"""A first look at a file before tree-sitter has parsed it: where its `__global__` kernels are defined.

Parsing a 5,000-line file with tree-sitter-cuda takes 40–80 ms; lenses must show sooner, so until the
source model is ready they come from this scan (about 1 ms), which the model then replaces.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

_BLOCK_COMMENT = re.compile(rb"/\*.*?(?:\*/|$)", re.S)
_PAREN = re.compile(rb"[()]")
_NAME_BEFORE_PAREN = re.compile(rb"([A-Za-z_]\w*)\s*$")
_TEMPLATE_BEFORE = re.compile(rb"\btemplate\s*<[^;{}]*>\s*(?:extern\s+\"C\"\s*)?$")
_ATTRIBUTES = frozenset(
    {b"__launch_bounds__", b"__cluster_dims__", b"__attribute__", b"__declspec", b"__align__", b"alignas"}
)
_TUNING_STRUCT = re.compile(rb"\bstruct\s+(\w+)_tuning\b")
_TEMPLATE_WINDOW = 4000  # bytes before `__global__` searched for its `template <...>`


@dataclass(frozen=True, slots=True)
class KernelHeader:
    """A kernel definition found by the scan: its name and the (zero-based) line where it starts."""

    name: str
    line: int
    templatized: bool  # the file has its `<name>_tuning` struct


def scan_kernels(text: str) -> tuple[KernelHeader, ...]:
    """The `__global__` function definitions of a CUDA text (declarations and commented-out ones skipped)."""
    data = text.encode("utf-8", errors="replace")
    structs = {m.group(1) for m in _TUNING_STRUCT.finditer(data)} if b"_tuning" in data else set()
    comments = [m.span() for m in _BLOCK_COMMENT.finditer(data)] if b"/*" in data else []
    comment_starts = [start for start, _ in comments]
    found = []
    line, counted = 0, 0
    at = data.find(b"__global__")
    while at >= 0:
        end = at + len(b"__global__")
        name = None if _in_comment(data, at, comments, comment_starts) else _definition_name(data, end)
        if name is not None:
            template = _TEMPLATE_BEFORE.search(data, max(0, at - _TEMPLATE_WINDOW), at)
            start = template.start() if template else at
            line += data.count(b"\n", counted, start)
            counted = start
            found.append(KernelHeader(name.decode("utf-8", errors="replace"), line, name in structs))
        at = data.find(b"__global__", end)
    return tuple(found)


def _in_comment(data: bytes, at: int, comments: list[tuple[int, int]], starts: list[int]) -> bool:
    """Whether `at` is inside a comment (strings are not considered: this is a first look)."""
    i = bisect.bisect_right(starts, at) - 1
    if i >= 0 and comments[i][0] <= at < comments[i][1]:
        return True
    line_start = data.rfind(b"\n", 0, at) + 1
    return data.find(b"//", line_start, at) >= 0


def _definition_name(data: bytes, at: int) -> bytes | None:
    """The function name after `__global__` at `at`, when a body (not `;`) follows its parameters."""
    while True:
        paren = data.find(b"(", at)
        if paren < 0 or any(c in data[at:paren] for c in b";{}"):
            return None
        name = _NAME_BEFORE_PAREN.search(data, at, paren)
        if name is None:
            return None
        at = _after_parentheses(data, paren)
        if name.group(1) not in _ATTRIBUTES:  # `__launch_bounds__(...)` and the like come before the name
            break
    brace, semicolon = data.find(b"{", at), data.find(b";", at)
    return name.group(1) if brace >= 0 and (semicolon < 0 or brace < semicolon) else None


def _after_parentheses(data: bytes, open_at: int) -> int:
    """The offset just past the `)` that closes the `(` at `open_at`."""
    depth = 0
    for paren in _PAREN.finditer(data, open_at):
        depth += 1 if paren.group() == b"(" else -1
        if depth == 0:
            return paren.end()
    return len(data)
