"""What the server's own process knows of one analysed version of a document (the analysis itself lives in the
analysis process, lsp/host.py): where its kernels, their tuning structs and launches are, and what their lenses
show. Enough to answer lenses, code actions' kernel lookup and results without the source model.

Sent between the processes as flat tuples: the 20,000 kernels of a 200,000-line file unpickle in ~7 ms this way,
as a dataclass each they took 75 ms of the server's event loop.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from cutune.cuda.edit import Edit
from cutune.lsp.analysis import DocumentAnalysis
from cutune.lsp.lenses import KernelLensState
from cutune.lsp.scan import KernelHeader
from cutune.tune.result import TuneResult

TEMPLATIZED, STALE, APPLIED = 1, 2, 4  # a kernel's flags
NONE = -1  # a kernel without a tuning struct: its struct's lines

# a kernel's first and last lines, its tuning struct's first and last lines (NONE), and its flags
Row = tuple[int, int, int, int, int]


@dataclass(frozen=True)
class Summary:
    """One version of a document: its kernels in the order the analysis lists them."""

    version: int | None
    analysed: bool  # False: a first look (lsp/scan.py), which knows only where kernels start
    names: tuple[str, ...]
    rows: tuple[Row, ...]
    results: dict[str, TuneResult]  # the kernels with a stored result
    launches: tuple[tuple[int, int, int], ...] = ()  # each launch's first and last lines, and its kernel's index
    # made from the analysis of another version (lsp/incremental.py): that version, the edit between them, and
    # the kernels looked at again
    moved_from: tuple[int | None, Edit, frozenset[str]] | None = None

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.names)}

    def index(self, kernel: str) -> int | None:
        """A kernel's place in `names`."""
        return self._index.get(kernel)

    def lines(self, kernel: str) -> tuple[int, int] | None:
        """The (zero-based) first and last lines of a kernel's definition."""
        i = self.index(kernel)
        return None if i is None else self.rows[i][:2]

    def at(self, line: int) -> str | None:
        """The kernel whose definition, tuning struct or launch site covers a (zero-based) line."""
        for name, (first, last, struct_first, struct_last, _) in zip(self.names, self.rows, strict=True):
            if first <= line <= last or struct_first <= line <= struct_last:
                return name
        site = next((s for s in self.launches if s[0] <= line <= s[1]), None)
        return self.names[site[2]] if site is not None else None

    def result(self, kernel: str) -> tuple[TuneResult | None, bool, bool]:
        """A kernel's stored result, whether it is stale, and whether the source holds it already."""
        i, result = self.index(kernel), self.results.get(kernel)
        flags = self.rows[i][4] if i is not None else 0
        return result, bool(flags & STALE), bool(flags & APPLIED)

    def lens_states(
        self, tuning: frozenset[str], specified: frozenset[str], only: str | None = None
    ) -> Iterator[KernelLensState]:
        """What each kernel's lenses show (or the one kernel `only`'s); `specified`: the kernels with a spec."""
        capture = next((name for name in self.names if name not in specified), None)
        indices: Iterable[int] = range(len(self.names))
        if only is not None:
            i = self.index(only)
            indices = () if i is None else (i,)
        for i in indices:
            name, (first, _, _, _, flags) = self.names[i], self.rows[i]
            yield KernelLensState(
                name,
                first,
                bool(flags & TEMPLATIZED),
                self.results.get(name),
                bool(flags & STALE),
                bool(flags & APPLIED),
                name in tuning,
                name == capture,
            )


def summarize(analysis: DocumentAnalysis) -> Summary:
    """An analysis's summary."""
    names, rows, results = [], [], {}
    for v in analysis.kernels:
        first, last = v.lines()
        struct = v.struct.span if v.struct is not None else None
        flags = (v.struct is not None) * TEMPLATIZED | v.stale * STALE | v.applied * APPLIED
        names.append(v.name)
        rows.append((first, last, *((struct.start.line, struct.end.line) if struct else (NONE, NONE)), flags))
        if v.result is not None:
            results[v.name] = v.result
    index = {name: i for i, name in enumerate(names)}
    launches = tuple((e.first_line, e.last_line, index[e.kernel]) for e in analysis.launches if e.kernel in index)
    return Summary(analysis.version, True, tuple(names), tuple(rows), results, launches, analysis.moved_from)


def first_look(version: int | None, headers: Iterable[KernelHeader], results: dict[str, TuneResult]) -> Summary:
    """The summary of a first look: where the kernels start, whether they are templatized, their results."""
    found = tuple(headers)
    rows = tuple((h.line, h.line, NONE, NONE, TEMPLATIZED if h.templatized else 0) for h in found)
    return Summary(version, False, tuple(h.name for h in found), rows, results)
