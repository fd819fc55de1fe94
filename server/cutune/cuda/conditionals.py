"""The device pass's view of a text whose preprocessor conditionals split its braces.

tree-sitter reads both branches of an `#if`, so a kernel whose branches open and close braces between them
(`#if __CUDA_ARCH__ < 800  if constexpr (bf16) { return; } else {  #endif ... #if ... } #endif`) does not parse,
though each pass the compiler makes is balanced. For such texts the parser reads the view of a CUDA device pass
instead: each conditional whose branch the pass takes can be decided here has its directive lines and the branches
not taken blanked (same byte length, newlines kept, so every offset into the text stays valid); the text itself is
never changed. Decided are `defined(X)` for the platform macros of another vendor's build (ROCm/HIP, MUSA: never
defined in a CUDA build) and of the CUDA device pass itself (`__CUDACC__`, `__CUDA_ARCH__`: defined), and
comparisons of `__CUDA_ARCH__` with a number, at ARCH (sm_90, the GPUs cutune measures on), with `!`, `&&`, `||`
and parentheses; a conditional reading anything else stays as it is, branches and all. One that reads
`__CUDA_ARCH__` is decided only where its branches split braces: elsewhere it may be host code's (`#ifndef
__CUDA_ARCH__` around a launch), which the device pass's view would lose.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

ARCH = 900  # __CUDA_ARCH__ of the device pass the view is of
_DEFINED = {"__CUDACC__": True, "__CUDA_ARCH__": True}
_FOREIGN = re.compile(r"USE_ROCM|\w*_(?:USE|WITH)_HIP|\w*_USE_MUSA|USE_MUSA|__HIP\w*|__HIPCC\w*|__MUSACC__")
_DIRECTIVE = re.compile(rb"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b(.*)$")
# comments, string and character literals: braces there are not code
_NOT_CODE = re.compile(rb'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_TOKEN = re.compile(r"\s*(defined|\d+[uUlL]*|[A-Za-z_]\w*|&&|\|\||[!<>=]=|[<>!()])")


@dataclass
class _Group:
    """One `#if` … `#endif`: each branch's condition (None for `#else`) and byte range, the directives' ranges."""

    branches: list[tuple[str | None, int, int]] = field(default_factory=list)  # (condition, body start, body end)
    directives: list[tuple[int, int]] = field(default_factory=list)


def device_view(data: bytes) -> tuple[bytes, tuple[tuple[int, int], ...]]:
    """`data` with the conditionals a CUDA device pass decides resolved (see the module), and the byte ranges
    blanked; `data` itself and () where none is decided or the directives do not pair up."""
    groups = _groups(data)
    if groups is None:
        return data, ()
    blanked: list[tuple[int, int]] = []
    for group in groups:
        taken = _taken(group)
        if taken is None or (_per_pass(group) and not _splits_braces(data, group)):
            continue
        blanked += group.directives
        blanked += [(start, end) for i, (_, start, end) in enumerate(group.branches) if i != taken]
    if not blanked:
        return data, ()
    view = bytearray(data)
    for start, end in blanked:
        view[start:end] = bytes(b if b == 0x0A else 0x20 for b in data[start:end])
    return bytes(view), tuple(sorted(blanked))


def _groups(data: bytes) -> list[_Group] | None:
    """Every conditional of the text, outer ones first; None where an `#elif`, `#else` or `#endif` has no `#if`,
    or an `#if` no `#endif`."""
    found: list[_Group] = []
    open_: list[_Group] = []
    offset = 0
    lines = data.split(b"\n")
    i = 0
    while i < len(lines):
        start = offset
        line = lines[i]
        while line.endswith(b"\\") and i + 1 < len(lines):  # a directive continued on the next line
            offset += len(lines[i]) + 1
            i += 1
            line = line[:-1] + b" " + lines[i]
        end = offset + len(lines[i])
        offset = end + 1
        i += 1
        match = _DIRECTIVE.match(line)
        if match is None:
            continue
        kind, rest = match.group(1).decode(), match.group(2).decode("utf-8", errors="replace")
        rest = re.sub(r"//.*|/\*.*?\*/", " ", rest).strip()
        if kind in ("if", "ifdef", "ifndef"):
            condition = {"if": rest, "ifdef": f"defined({rest})", "ifndef": f"!defined({rest})"}[kind]
            group = _Group()
            group.branches.append((condition, end, end))
            group.directives.append((start, end))
            open_.append(group)
            found.append(group)
            continue
        if not open_:
            return None
        group = open_[-1]
        condition_, body_start, _ = group.branches[-1]
        group.branches[-1] = (condition_, body_start, start)
        group.directives.append((start, end))
        if kind == "endif":
            open_.pop()
        else:
            group.branches.append((rest if kind == "elif" else None, end, end))
    return None if open_ else found


def _per_pass(group: _Group) -> bool:
    """Whether the group's branch depends on the pass (`__CUDA_ARCH__`: host code reads the other branch)."""
    return any(condition is not None and "__CUDA_ARCH__" in condition for condition, _, _ in group.branches)


def _splits_braces(data: bytes, group: _Group) -> bool:
    """Whether a branch of the group closes a brace it did not open (`} else {`), leaves one open, or ends in an
    `else` whose statement follows the group."""
    for _, start, end in group.branches:
        code = _NOT_CODE.sub(b" ", data[start:end])
        depth = 0
        for brace in re.findall(rb"[{}]", code):
            depth += 1 if brace == b"{" else -1
            if depth < 0:
                return True
        if depth or re.search(rb"\belse\s*$", code):
            return True
    return False


def _taken(group: _Group) -> int | None:
    """The index of the branch the device pass takes (len(branches) when none is), None when undecided."""
    for i, (condition, _, _) in enumerate(group.branches):
        if condition is None:
            return i
        value = _evaluate(condition)
        if value is None:
            return None
        if value:
            return i
    return len(group.branches)


def _evaluate(condition: str) -> bool | None:
    """The condition's truth in the device pass; None where it reads what the pass does not fix."""
    tokens: list[str] = []
    position = 0
    while position < len(condition):
        match = _TOKEN.match(condition, position)
        if match is None:
            if condition[position:].strip():
                return None
            break
        tokens.append(match.group(1))
        position = match.end()
    parser = _Parser(tokens)
    value = parser.disjunction()
    return value if parser.done() else None


def _truth(value: bool | int | None) -> bool | None:
    """A number read as a condition (`#if 0`, `#if __CUDA_ARCH__`): true where not zero."""
    return value if value is None or isinstance(value, bool) else value != 0


class _Parser:
    """A three-valued reading of a `#if` condition: True, False, or None (not decided)."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.at = 0
        self.failed = False

    def done(self) -> bool:
        return not self.failed and self.at == len(self.tokens)

    def _peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> str | None:
        token = self._peek()
        if token is None or (expected is not None and token != expected):
            self.failed = True
            return None
        self.at += 1
        return token

    def disjunction(self) -> bool | None:
        return self._chain("||", self.conjunction, True)

    def conjunction(self) -> bool | None:
        return self._chain("&&", self.comparison, False)

    def _chain(self, operator: str, operand: Callable[[], bool | None], absorbing: bool) -> bool | None:
        """`a op b op ...` in three values: `absorbing` where any part is (true for `||`, false for `&&`), else
        undecided where any part is, else the other value."""
        value = operand()
        while self._peek() == operator:
            self._take()
            other = operand()
            if value is absorbing or other is absorbing:
                value = absorbing
            else:
                value = None if value is None or other is None else not absorbing
        return value

    def comparison(self) -> bool | None:
        left = self.unary()
        operator = self._peek()
        if operator not in ("<", "<=", ">", ">=", "==", "!="):
            return _truth(left)
        self._take()
        right = self.unary()
        if not isinstance(left, int) or not isinstance(right, int):
            return None
        return {
            "<": left < right,
            "<=": left <= right,
            ">": left > right,
            ">=": left >= right,
            "==": left == right,
            "!=": left != right,
        }[operator]

    def unary(self) -> bool | int | None:
        token = self._take()
        if token is None:
            return None
        if token == "!":
            value = _truth(self.unary())
            return None if value is None else not value
        if token == "(":
            value = self.disjunction()
            self._take(")")
            return value
        if token == "defined":
            parenthesised = self._peek() == "("
            if parenthesised:
                self._take("(")
            name = self._take() or ""
            if parenthesised:
                self._take(")")
            if name in _DEFINED:
                return _DEFINED[name]
            return False if _FOREIGN.fullmatch(name) else None
        if token[0].isdigit():
            return int(token.rstrip("uUlL"))
        if token == "__CUDA_ARCH__":
            return ARCH
        return None
