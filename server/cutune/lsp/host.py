"""The analysis process: each open document's analysis, made and kept outside the server's process.

The server (lsp/session.py, through lsp/process.py) sends it each version's text; it answers with what the server
needs to answer requests at once (the diagnostics and lenses as JSON, a `Summary`) and, when asked, a kernel's
code actions, a hover, a command's edit. Its work holds its own GIL and runs at a lower CPU priority: in one
process, a 200,000-line file's analysis and variant offers held the GIL for seconds, and the server's code
actions waited 100 to 200 ms for it. Two threads, as the server had: one for the analyses and their lenses, in
order, one for the requests' work, never behind an analysis.
"""

from __future__ import annotations

import functools
import gc
import logging
import os
import queue
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from lsprotocol import types

from cutune.cuda.parse import collector_paused
from cutune.errors import CutuneError
from cutune.lsp.actions import Offer, kernel_offers
from cutune.lsp.analysis import DocumentAnalysis, analyze
from cutune.lsp.capture import specified_kernels
from cutune.lsp.convert import path_uri
from cutune.lsp.diagnostics import DocumentDiagnostics, document_diagnostics, spec_diagnostics
from cutune.lsp.edits import Edit, apply_edit, templatize_edit
from cutune.lsp.hover import hover
from cutune.lsp.incremental import reanalyze
from cutune.lsp.lenses import Window, lenses_json, windowed
from cutune.lsp.process import ANALYSIS, CANCELLED, FAILED, REFUSED, REQUESTS, SKIP, STOP
from cutune.lsp.results import ResultStore
from cutune.lsp.scan import scan_kernels
from cutune.lsp.summary import Summary, first_look, summarize
from cutune.lsp.wire import Serialized
from cutune.lsp.worker import Cancelled, background

log = logging.getLogger(__name__)

Stop = threading.Event
Analysed = tuple[Summary, Serialized, str, list[types.Diagnostic]]  # diagnostics' parameters, the spec's URI and its


class Host:
    """The analyses of the open documents; each method runs in one of the process's two threads and is given the
    document's stop event as it was when the call arrived (set by a newer version's STOP)."""

    def __init__(self) -> None:
        self.results = ResultStore()
        self._analyses: dict[str, DocumentAnalysis] = {}
        self._diagnostics: dict[str, DocumentDiagnostics] = {}
        self._summaries: dict[str, Summary] = {}  # of the last analysis, or of a first look before it
        self._paths: dict[str, Path] = {}

    def analyse(
        self,
        uri: str,
        path: Path,
        text: str,
        version: int | None,
        whole: bool,
        window: Window | None,
        *,
        stop: Stop,
    ) -> Analysed:
        """Analyse a version, from the last analysis where the edit allows (lsp/incremental.py) unless `whole`;
        its diagnostics with the hints in `window` only, where the document has that many kernels (`windowed`)."""
        previous, previous_found = self._analyses.get(uri), self._diagnostics.get(uri)
        # the collector paused throughout: with a large file's model alive, the collections the views and
        # diagnostics trigger took half of a 200,000-line analysis
        with collector_paused():
            made = None
            if not whole and previous is not None and previous_found is not None:
                made = reanalyze(previous, previous_found, text, version, stop.is_set)
            if made is None:
                analysis = analyze(uri, path, text, version, self.results, stop.is_set)
                made = analysis, document_diagnostics(analysis, stop.is_set)
            analysis, found = made
            summary = summarize(analysis)
            shown = windowed(len(summary.names), window)
            answer = summary, found.serialized(uri, shown), path_uri(analysis.spec_path), spec_diagnostics(analysis)
            settle()
        self._analyses[uri], self._diagnostics[uri], self._summaries[uri], self._paths[uri] = (
            analysis,
            found,
            summary,
            path,
        )
        return answer

    def look(
        self,
        uri: str,
        path: Path,
        text: str,
        version: int | None,
        tuning: frozenset[str],
        listed: int,
        window: Window | None,
        *,
        stop: Stop,
    ) -> tuple[Summary, Serialized]:
        """Where a document's kernels are, for its lenses before its first analysis (which re-uses the parse)."""
        summary = self._summaries.get(uri)
        if summary is None:
            headers = scan_kernels(text, str(path))
            stored = self.results.stored(path)
            found = {h.name: self.results.get(path, h.name, stored) for h in headers}
            summary = first_look(version, headers, {k: r for k, r in found.items() if r is not None})
            self._summaries.setdefault(uri, summary)
            self._paths[uri] = path
        shown = windowed(len(summary.names), window)
        return summary, self.lenses(uri, summary.version, tuning, listed, shown, stop=stop)

    def lenses(
        self, uri: str, version: int | None, tuning: frozenset[str], listed: int, window: Window | None, *, stop: Stop
    ) -> Serialized:
        """The lenses of a version (list number `listed`; those in `window` only, with one), as JSON; Cancelled
        when another version is summarized."""
        summary = self._summaries.get(uri)
        if summary is None or summary.version != version:
            raise Cancelled(f"lenses of {uri} version {version}")
        states = summary.lens_states(tuning, specified_kernels(self._paths[uri]))
        with collector_paused():
            return Serialized(lenses_json(listed, states, stop.is_set, window))

    def offers(self, uri: str, version: int | None, kernel: str, *, stop: Stop) -> list[Offer] | None:
        """A kernel's code actions' edits in a version (the costly part: templatizing, proposing variants)."""
        analysis = self._analysis(uri, version)
        view = analysis.view(kernel)
        if view is None:
            return None
        found = kernel_offers(analysis, view)
        settle()
        return found

    def diagnostics(self, uri: str, version: int | None, window: Window | None, *, stop: Stop) -> Serialized:
        """The last analysis's diagnostics again, with another window's hints; Cancelled when it is not of
        `version` any more."""
        summary, found = self._summaries.get(uri), self._diagnostics.get(uri)
        if summary is None or found is None or summary.version != version:
            raise Cancelled(f"diagnostics of {uri} version {version}")
        return found.serialized(uri, windowed(len(summary.names), window))

    def hover(self, uri: str, position: types.Position, *, stop: Stop) -> types.Hover | None:
        """The hover at a position, from the last analysis (of any version)."""
        analysis = self._analyses.get(uri)
        return hover(analysis, position) if analysis is not None else None

    def templatize(self, uri: str, version: int | None, kernel: str, *, stop: Stop) -> tuple[Edit | None, list[str]]:
        """The templatize edit of a kernel (None when there is nothing to do) and its parameters' names."""
        analysis = self._analysis(uri, version, command=True)
        ctx = analysis.context(kernel)
        return templatize_edit(analysis, ctx), [p.name for p in ctx.template.space.params]

    def apply(self, uri: str, version: int | None, kernel: str, *, stop: Stop) -> Edit:
        """The edit writing a kernel's stored result into the source (the server checked that it applies)."""
        analysis = self._analysis(uri, version, command=True)
        view = analysis.view(kernel)
        if view is None or view.result is None:
            raise CutuneError("it has no stored result: autotune it first")
        return apply_edit(analysis, analysis.context(kernel), view.result)

    def close(self, uri: str, *, stop: Stop) -> None:
        """Forget a document."""
        for kept in (self._analyses, self._diagnostics, self._summaries, self._paths):
            kept.pop(uri, None)

    def _analysis(self, uri: str, version: int | None, command: bool = False) -> DocumentAnalysis:
        analysis = self._analyses.get(uri)
        if analysis is None or analysis.version != version:
            if command:
                raise CutuneError("the document changed meanwhile: try again")
            raise Cancelled(f"{uri} version {version} is no longer the last analysed")
        return analysis


METHODS = frozenset(("analyse", "look", "lenses", "diagnostics", "offers", "hover", "templatize", "apply", "close"))


def settle() -> None:
    """Take what is alive now out of the cycle collector's reach (`gc.freeze`): a large file's analysis leaves
    millions of long-lived objects, and each collection walked them all again, holding every thread back (at
    200,000 lines, 0.5 to 0.7 s a collection, collecting nothing). They are still freed when no longer used
    (reference counting); only cycles among them would stay, and an analysis makes none."""
    gc.freeze()


class _Lane:
    """One daemon thread running calls in order."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def put(self, work: Callable[[], None]) -> None:
        self._queue.put(work)

    def _serve(self) -> None:
        while True:
            self._queue.get()()


def serve(conn: Connection) -> None:
    """The analysis process's main function: answer the server's calls until it goes away."""
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # the server's stdout is the editor's channel: not ours
    logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(name)s (analysis): %(message)s", force=True)
    background()  # before the threads start: they inherit the lower priority
    sys.setswitchinterval(0.001)  # the requests' thread gets the GIL soon while an analysis runs
    host = Host()
    lanes = {ANALYSIS: _Lane("cutune-analysis"), REQUESTS: _Lane("cutune-requests")}
    stops: dict[str, Stop] = {}
    skipped: set[int] = set()
    sending = threading.Lock()

    def answer(ident: int, ok: bool, payload: Any) -> None:
        with sending:
            try:
                conn.send((ident, ok, payload))
            except (OSError, ValueError):  # the server is gone
                os._exit(0)
            except Exception as e:  # an answer that cannot be pickled: a bug, reported as one
                log.exception("cannot send the answer to call %d", ident)
                conn.send((ident, False, (FAILED, f"{type(e).__name__}: {e}")))

    def run(ident: int, method: str, args: tuple[Any, ...], stop: Stop) -> None:
        if ident in skipped:
            skipped.discard(ident)
            answer(ident, False, (CANCELLED, "skipped"))
            return
        try:
            value = getattr(host, method)(*args, stop=stop)
        except Cancelled as e:
            answer(ident, False, (CANCELLED, str(e)))
        except CutuneError as e:
            answer(ident, False, (REFUSED, str(e)))
        except Exception as e:  # a bug in the core on some text: the server keeps serving
            log.exception("%s failed", method)
            answer(ident, False, (FAILED, f"{type(e).__name__}: {e}"))
        else:
            answer(ident, True, value)

    while True:
        try:
            ident, lane, method, args = conn.recv()
        except (EOFError, OSError):  # the server is gone
            os._exit(0)
        if method == STOP:
            stops.pop(args[0], Stop()).set()
        elif method == SKIP:
            skipped.add(args[0])
        elif method in METHODS and lane in lanes:
            stop = stops.setdefault(args[0], Stop())
            lanes[lane].put(functools.partial(run, ident, method, args, stop))
        else:
            answer(ident, False, (FAILED, f"unknown call {method!r} in {lane!r}"))
