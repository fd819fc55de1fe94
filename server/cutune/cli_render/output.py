"""Where command-line output goes: rich on a terminal; plain, unwrapped text or JSON into pipes and files."""

from __future__ import annotations

import enum
import json
import math
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

PLAIN_GAP = "  "  # between the columns of a plain table


class OutputFormat(enum.StrEnum):
    """How a command writes its result to standard output."""

    TABLE = "table"
    JSON = "json"


def console(*, stderr: bool = False) -> Console:
    """A console that wraps nothing when it writes into a pipe or a file (scripts read whole lines)."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr, highlight=False)
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=100_000)


def print_table(target: Console, table: Table) -> None:
    """A rich table on a terminal; elsewhere a plain one: title, header, rows (columns aligned by spaces) and
    caption."""
    if target.is_terminal:
        target.print(table)
        return
    columns = table.columns
    rows = [
        [_plain(c.header) for c in columns],
        *zip(*([_plain(cell) for cell in c.cells] for c in columns), strict=True),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = [] if table.title is None else [_plain(table.title)]
    for row in rows:
        cells = [
            cell.rjust(w) if col.justify == "right" else cell.ljust(w)
            for cell, w, col in zip(row, widths, columns, strict=True)
        ]
        lines.append(PLAIN_GAP.join(cells).rstrip())
    if table.caption is not None:
        lines.append(_plain(table.caption))
    target.out("\n".join(lines), highlight=False)


def print_json(data: Any) -> None:
    """A JSON document on standard output, for scripts."""
    sys.stdout.write(json.dumps(_finite(data), indent=2, allow_nan=False, default=str) + "\n")
    sys.stdout.flush()


def user_text(text: object) -> str:
    """Text from a file or an error with its brackets kept (rich would read `[gpu]` as markup)."""
    return escape(str(text))


def _finite(data: Any) -> Any:
    """`data` with NaN and infinities as null: strict JSON parsers reject them."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(v) for v in data]
    return data


def _plain(cell: object) -> str:
    if isinstance(cell, Text):
        return cell.plain
    text = str(cell)
    return Text.from_markup(text).plain if "[" in text else text
