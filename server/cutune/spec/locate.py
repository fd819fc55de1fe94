"""Where keys are written in a TOML text: tomllib gives values but no positions, errors need lines."""

from __future__ import annotations

import bisect
import re

KeyPath = tuple[str | int, ...]  # table keys and array indices, e.g. ("kernel", "k", "args", 1, "dtype")

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SCALAR_END = re.compile(r"[,\]}#\n]")


def dotted(path: KeyPath) -> str:
    """A key path as users read it: `kernel.k.args[1].dtype`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = part if _BARE_KEY.fullmatch(part) else f'"{part}"'
            out += f".{text}" if out else text
    return out


def key_lines(text: str) -> dict[KeyPath, int]:
    """The 1-based line of every table header, key and array element in a (valid) TOML text."""
    return _Scanner(text).scan()


def line_of(lines: dict[KeyPath, int], path: KeyPath) -> int | None:
    """The line of `path`, or of its closest written ancestor (e.g. an inline table's key)."""
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return None


class _Scanner:
    """A lenient reader of TOML structure that records positions; tomllib has already checked the text."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.lines: dict[KeyPath, int] = {}

    def scan(self) -> dict[KeyPath, int]:
        table: KeyPath = ()
        array_counts: dict[KeyPath, int] = {}
        while True:
            self.skip_blank(newlines=True)
            if self.i >= len(self.s):
                return self.lines
            start = self.i
            if self.s.startswith("[[", self.i):
                self.i += 2
                key = self.key()
                index = array_counts.get(key, 0)
                array_counts[key] = index + 1
                table = (*key, index)
                self.record(key, start)
                self.record(table, start)
            elif self.s.startswith("[", self.i):
                self.i += 1
                table = self.key()
                self.record(table, start)
            else:
                key = self.key()
                self.record((*table, *key), start)
                if self.s.startswith("=", self.i):
                    self.i += 1
                    self.skip_blank(newlines=False)
                    self.value((*table, *key))
            self.skip_line()

    def record(self, path: KeyPath, offset: int) -> None:
        for n in range(1, len(path) + 1):
            self.lines.setdefault(path[:n], bisect.bisect_left(self.newlines, offset) + 1)

    def skip_blank(self, *, newlines: bool) -> None:
        blank = " \t\r\n" if newlines else " \t"
        while self.i < len(self.s):
            ch = self.s[self.i]
            if ch in blank:
                self.i += 1
            elif ch == "#" and newlines:
                self.skip_line()
            else:
                return

    def skip_line(self) -> None:
        end = self.s.find("\n", self.i)
        self.i = len(self.s) if end < 0 else end + 1

    def key(self) -> KeyPath:
        """A dotted key; stops after it (and after a closing `]`/`]]` of a header)."""
        parts: list[str] = []
        while True:
            self.skip_blank(newlines=False)
            if self.i < len(self.s) and self.s[self.i] in "\"'":
                parts.append(self.string())
            else:
                m = _BARE_KEY.match(self.s, self.i)
                if not m:
                    break
                parts.append(m.group())
                self.i = m.end()
            self.skip_blank(newlines=False)
            if not self.s.startswith(".", self.i):
                break
            self.i += 1
        while self.i < len(self.s) and self.s[self.i] in "]":
            self.i += 1
        return tuple(parts)

    def string(self) -> str:
        quote = self.s[self.i]
        triple = quote * 3
        if self.s.startswith(triple, self.i):
            end = self.s.find(triple, self.i + 3)
            while quote == '"' and end > 0 and _escaped(self.s, end):
                end = self.s.find(triple, end + 1)
            end = len(self.s) if end < 0 else end
            value, self.i = self.s[self.i + 3 : end], end + 3
            return value
        end = self.s.find(quote, self.i + 1)
        while quote == '"' and end > 0 and _escaped(self.s, end):
            end = self.s.find(quote, end + 1)
        end = len(self.s) if end < 0 else end
        value, self.i = self.s[self.i + 1 : end], end + 1
        return value

    def value(self, path: KeyPath) -> None:
        ch = self.s[self.i : self.i + 1]
        if ch in ('"', "'"):
            self.string()
        elif ch == "[":
            self.i += 1
            self.items(path, "]", array=True)
        elif ch == "{":
            self.i += 1
            self.items(path, "}", array=False)
        else:
            m = _SCALAR_END.search(self.s, self.i)
            self.i = m.start() if m else len(self.s)

    def items(self, path: KeyPath, close: str, *, array: bool) -> None:
        """Array elements (recorded by index) or inline-table entries (recorded by key) up to `close`."""
        index = 0
        while self.i < len(self.s):
            self.skip_blank(newlines=True)
            if self.s.startswith(close, self.i):
                self.i += 1
                return
            start = self.i
            item: KeyPath = (*path, index) if array else (*path, *self.key())
            self.record(item, start)
            if not array:
                self.skip_blank(newlines=False)
                self.i += self.s.startswith("=", self.i)
                self.skip_blank(newlines=False)
            self.value(item)
            self.skip_blank(newlines=True)
            if self.s.startswith(",", self.i):
                self.i += 1
            elif self.i == start:
                self.i += 1  # not TOML we understand: move on rather than loop
            index += 1


def _escaped(s: str, at: int) -> bool:
    backslashes = 0
    while at - backslashes - 1 >= 0 and s[at - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 1
