"""The server's state: settings, analyses of open documents, stored results and autotune jobs."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from lsprotocol import types
from pygls.uris import to_fs_path

from cutune.agent.settings import api_key_from_env
from cutune.cuda.edit import Overlaps
from cutune.cuda.parse import collector_paused
from cutune.errors import CutuneError
from cutune.lsp import lenses
from cutune.lsp.actions import Offer, actions_for, kernel_offers, moved_offers
from cutune.lsp.analysis import DocumentAnalysis, KernelView, analyze
from cutune.lsp.capture import specified_kernels
from cutune.lsp.convert import path_uri
from cutune.lsp.diagnostics import DocumentDiagnostics, document_diagnostics, spec_diagnostics
from cutune.lsp.incremental import reanalyze
from cutune.lsp.jobs import JOB_STATUS, Jobs, JobState, JobStatus, TuneJob, tuning_work
from cutune.lsp.lenses import KernelLensState
from cutune.lsp.results import ResultStore
from cutune.lsp.scan import KernelHeader, scan_kernels
from cutune.lsp.settings import Settings, parse_settings
from cutune.lsp.wire import Serialized
from cutune.lsp.worker import Cancelled, Worker
from cutune.project import KernelContext
from cutune.tune.result import TuneResult

if TYPE_CHECKING:  # the server imports this module
    from cutune.lsp.server import CutuneServer

log = logging.getLogger(__name__)
_T = TypeVar("_T")

SOURCE_SUFFIXES = (".cu", ".cuh")
WATCHED = ("**/*.tune.toml", "**/.cutune/results/*.json")


class Session:
    """Everything one server knows between requests."""

    CHANGE_DELAY_S = 0.15  # analyse once typing pauses this long
    # start after the editor's first requests; the first look that answers them (lsp/scan.py) leaves its tree
    # for the analysis to re-use
    OPEN_DELAY_S = 0.25
    # a kernel's code actions are computed once per document version, off the request path; a request waits
    # this long for them, then answers with none (the editor asks again as the cursor moves): a kernel's first
    # offers take from 0.1 s to seconds in a large file, and a request waiting for them held the editor back
    # (30 ms, with the pipe and a busy analysis thread, made code actions take 35 to 65 ms at 200,000 lines)
    ACTIONS_WAIT_S = 0.01

    def __init__(self, server: CutuneServer) -> None:
        self.server = server
        self.settings = Settings()
        self.results = ResultStore()
        self.jobs = Jobs(self._job_changed_in_thread)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._analyses: dict[str, DocumentAnalysis] = {}  # each document's last analysis, of any version
        self._diagnostics: dict[str, DocumentDiagnostics] = {}  # and its diagnostics
        self._whole: set[str] = set()  # documents whose next analysis must be whole (more than their text changed)
        self._outlines: dict[str, _Outline] = {}  # first looks, before the first analysis
        self._pending: dict[str, asyncio.Task[DocumentAnalysis | None]] = {}
        self._stops: dict[str, threading.Event] = {}  # set to stop a pending analysis in its thread
        self._asked: dict[str, str] = {}  # the kernel each document's last code actions were asked for
        self._offers: dict[tuple[str, int | None, str], asyncio.Future[list[Offer] | None]] = {}
        # each kernel's last offers, and the version they were made for
        self._made: dict[tuple[str, str], tuple[int | None, KernelView, list[Offer] | None]] = {}
        # each document's lenses, and the analysis or outline and the jobs they were made from
        self._lenses: dict[str, tuple[object, frozenset[str], Serialized]] = {}
        # analyses run one at a time in their own thread; requests' own work in another, never behind them
        self._analyser = Worker("cutune-analysis")
        self._requests = Worker("cutune-requests")
        self._spec_uris: dict[str, str] = {}  # document → the spec file it published diagnostics to
        self._documents: dict[str, int] = {}  # document → the number its lenses carry (`_document`)
        self._uris: list[str] = []  # and back

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Remember the event loop, for notifications from the job thread."""
        self._loop = loop

    # settings

    def configure(self, raw: object) -> None:
        """Take new settings; invalid keys get a warning and their defaults."""
        self.settings, invalid = parse_settings(raw)
        logging.getLogger("cutune").setLevel(self.settings.log_level.upper())
        if invalid:
            self.message(
                f"invalid setting(s) {', '.join(invalid)}: using the defaults (see the cutune docs)",
                types.MessageType.Warning,
            )
        if self.settings.agent.kind == "openai" and api_key_from_env() is None:
            self.message(
                "agent.kind is `openai` but neither CUTUNE_LLM_API_KEY nor OPENAI_API_KEY is set in the "
                "server's environment; the built-in planner is used",
                types.MessageType.Warning,
            )

    async def reload_settings(self, pushed: Any) -> None:
        """Pull the `cutune` section when the client can, else use what it pushed."""
        workspace = self.server.client_capabilities.workspace
        if workspace is not None and workspace.configuration:
            try:
                items = [types.ConfigurationItem(section="cutune")]
                values = await self.server.workspace_configuration_async(types.ConfigurationParams(items=items))
                self.configure(values[0] if values else None)
                return
            except Exception as e:  # the client failed the request: keep the current settings
                log.warning("workspace/configuration failed: %s", e)
                return
        self.configure(pushed.get("cutune") if isinstance(pushed, dict) else None)

    async def watch_files(self) -> None:
        """Register file watchers for specs and results, where the client lets servers do so."""
        workspace = self.server.client_capabilities.workspace
        watched = workspace.did_change_watched_files if workspace is not None else None
        if watched is None or not watched.dynamic_registration:
            return
        options = types.DidChangeWatchedFilesRegistrationOptions(
            watchers=[types.FileSystemWatcher(glob_pattern=g) for g in WATCHED]
        )
        registration = types.Registration(
            id="cutune-files", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
        )
        try:
            await self.server.client_register_capability_async(types.RegistrationParams(registrations=[registration]))
        except Exception as e:  # watching is a convenience: results still show on the next change
            log.warning("cannot watch files: %s", e)

    # messages

    def message(self, text: str, kind: types.MessageType) -> None:
        """A `window/showMessage` prefixed with `cutune: `."""
        self.server.window_show_message(types.ShowMessageParams(type=kind, message=f"cutune: {text}"))

    # documents and their analyses

    def refresh(self, uri: str, delay: float = 0.0, *, edited: bool = False) -> None:
        """Analyse a document again in the background, then publish its diagnostics and refresh lenses; an
        analysis of an older version still running is stopped. An `edited` document (nothing else changed: specs,
        results, settings) is analysed from its last analysis where the edit allows (lsp/incremental.py)."""
        if not uri.endswith(SOURCE_SUFFIXES):
            return
        if not edited:
            self._whole.add(uri)
        self._stop(uri)
        stop = self._stops[uri] = threading.Event()
        self._pending[uri] = asyncio.ensure_future(self._analyse(uri, delay, stop))

    def refresh_all(self) -> None:
        """Analyse every open CUDA document again."""
        for uri in list(self.server.workspace.text_documents):
            self.refresh(uri)

    def stop_all(self) -> None:
        """Stop every pending analysis (the server is exiting)."""
        for uri in list(self._pending):
            self._stop(uri)

    def _stop(self, uri: str) -> None:
        stop = self._stops.pop(uri, None)
        if stop is not None:
            stop.set()
        pending = self._pending.get(uri)
        if pending is not None and not pending.done():
            pending.cancel()

    def close(self, uri: str) -> None:
        """Forget a document; clear what it published."""
        self._stop(uri)
        self._pending.pop(uri, None)
        self._analyses.pop(uri, None)
        self._diagnostics.pop(uri, None)
        self._whole.discard(uri)
        self._outlines.pop(uri, None)
        self._lenses.pop(uri, None)
        self._asked.pop(uri, None)
        self._made = {k: v for k, v in self._made.items() if k[0] != uri}
        for target in (uri, self._spec_uris.pop(uri, None)):
            if target is not None:
                self._publish(target, [])

    async def analysis(self, uri: str) -> DocumentAnalysis | None:
        """The analysis of the document's current version (waiting for it if need be)."""
        current = self._current(uri)
        if current is not None:
            return current
        pending = self._pending.get(uri)
        if pending is None or pending.done():
            self.refresh(uri)
            pending = self._pending.get(uri)
        if pending is None:
            return None
        try:
            return await asyncio.shield(pending)
        except asyncio.CancelledError:
            if not pending.cancelled():
                raise  # the request itself was cancelled
            return await self.analysis(uri)  # a newer change replaced that analysis: wait for the new one

    async def latest(self, uri: str) -> DocumentAnalysis | None:
        """The document's last analysis at once, even of an older version; waits only when it has none."""
        return self._analyses.get(uri) or await self.analysis(uri)

    async def in_thread(self, work: Callable[[], _T]) -> _T:
        """Run a request's heavy part in the requests' thread (never behind an analysis)."""
        return await self._requests.run(work)

    async def context(self, uri: str, kernel: str) -> tuple[DocumentAnalysis, KernelContext]:
        """A document's analysis and one kernel's context; raises CutuneError when there is none."""
        analysis = await self.analysis(uri)
        if analysis is None:
            raise CutuneError(f"{uri} is not an open CUDA document")
        return analysis, await self.in_thread(lambda: analysis.context(kernel))

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        """The code actions at a range, from the document's last analysis; a kernel's offers are computed once
        per version in the requests' thread, and waited for at most ACTIONS_WAIT_S."""
        analysis = await self.latest(params.text_document.uri)
        view = analysis.view_at(params.range.start.line) if analysis is not None else None
        if analysis is None or view is None:
            return []
        self._asked[analysis.uri] = view.name
        earlier = self._made.get((analysis.uri, view.name))
        pending = self._pending.get(analysis.uri)
        if earlier is not None and pending is not None and not pending.done():
            # while a newer version is analysed, its offers are not begun: they would hold its analysis back (at
            # 200,000 lines a kernel's offers take seconds), and it makes them for this kernel when it ends
            _, view, found = earlier
            return [] if found is None else actions_for(view, found, params)
        offers = self._kernel_offers(analysis, view)
        if not offers.done() and earlier is not None:
            # an earlier version's offers at once: their edits name the version they were made for, which the
            # editor refuses to apply to another
            _, view, found = earlier
            return [] if found is None else actions_for(view, found, params)
        try:
            found = await asyncio.wait_for(asyncio.shield(offers), self.ACTIONS_WAIT_S)
        except TimeoutError:
            return []
        except asyncio.CancelledError:
            if not offers.cancelled():
                raise  # the request itself was cancelled
            return []  # a newer version's request replaced them
        return [] if found is None else actions_for(view, found, params)

    def _kernel_offers(self, analysis: DocumentAnalysis, view: KernelView) -> asyncio.Future[list[Offer] | None]:
        """A kernel's offers in this analysis, computed once in the requests' thread."""
        key = (analysis.uri, analysis.version, view.name)
        offers = self._offers.get(key)
        if offers is None or (offers.done() and offers.exception() is not None):
            for k, f in self._offers.items():
                if k[0] == key[0] and k[1] != key[1]:
                    # an older version's, not begun: skipped (it would hold back the analyses); one under way
                    # ends, and its offers answer until these are made (cancelled, they were lost: at 200,000
                    # lines a kernel's offers take longer than the pause between two edits, and none were made)
                    self._requests.skip(f)
            self._offers = {k: f for k, f in self._offers.items() if k[:2] == key[:2]}  # older versions' go
            offers = self._offers[key] = self._requests.run(lambda: settled(kernel_offers(analysis, view)))
            offers.add_done_callback(lambda done: self._keep_offers(analysis, view, done))
        return offers

    def _carry_offers(self, analysis: DocumentAnalysis) -> None:
        """The offers made for the version an analysis was made from, moved to its version, for the kernels above
        the edit it did not look at again: their code actions answer at once, without being made again (at
        200,000 lines that takes seconds, and held every thread back). Not those below: a variant's rewrite
        names lines of its kernel, which the edit moved."""
        if analysis.moved_from is None:
            return
        version, edit, again = analysis.moved_from
        for (uri, kernel), (made, _, found) in list(self._made.items()):
            view = analysis.view(kernel)
            if uri != analysis.uri or made != version or kernel in again or view is None:
                continue
            if view.lines()[1] >= edit.start_at.line:
                continue
            try:
                moved = None if found is None else moved_offers(found, uri, analysis.version, edit)
            except Overlaps:
                continue
            self._made[(uri, kernel)] = (analysis.version, view, moved)
            future: asyncio.Future[list[Offer] | None] = asyncio.get_running_loop().create_future()
            future.set_result(moved)
            self._offers[(uri, analysis.version, kernel)] = future

    def _keep_offers(
        self, analysis: DocumentAnalysis, view: KernelView, done: asyncio.Future[list[Offer] | None]
    ) -> None:
        """Remember a kernel's last offers made, for the requests of later versions until theirs are made."""
        if not done.cancelled() and done.exception() is None and analysis.uri in self._analyses:
            self._made[(analysis.uri, view.name)] = (analysis.version, view, done.result())

    def code_lenses(self, uri: str) -> Serialized | None:
        """The lenses of every kernel, from the last analysis or first look; None when there is neither. Made
        after each analysis, in its thread (the last ones are answered meanwhile), and here only for a first
        look or when a job starts or ends."""
        tuning = self.jobs.kernels(uri)
        cached = self._lenses.get(uri)
        if cached is not None and cached[1] == tuning:
            return cached[2]
        source: DocumentAnalysis | _Outline | None = self._analyses.get(uri) or self._outlines.get(uri)
        if source is None:
            return None
        cached = self._lenses[uri] = (source, tuning, self._render_lenses(uri, source, tuning))
        return cached[2]

    def _paused_lenses(
        self, uri: str, source: DocumentAnalysis, tuning: frozenset[str], stop: threading.Event
    ) -> Serialized:
        """An analysis's lenses, made with the collector paused (as the analysis); raises Cancelled once a newer
        version is to be analysed (it makes its own: these would hold its analysis back)."""
        with collector_paused():
            states = self._lens_states(uri, source, tuning)
            return Serialized(lenses.lenses_json(self._document(uri), states, stop.is_set))

    def _render_lenses(self, uri: str, source: DocumentAnalysis | _Outline, tuning: frozenset[str]) -> Serialized:
        return Serialized(lenses.lenses_json(self._document(uri), self._lens_states(uri, source, tuning)))

    def _document(self, uri: str) -> int:
        """A small number for a document's URI, which its lenses carry instead of the URI."""
        found = self._documents.get(uri)
        if found is None:
            found = self._documents[uri] = len(self._uris)
            self._uris.append(uri)
        return found

    def resolve_lens(self, lens: types.CodeLens) -> types.CodeLens:
        """A lens with its command, from what its kernel shows now (`lenses.lenses_json` sent it without)."""
        data = lens.data
        if not (
            isinstance(data, list) and len(data) == 3 and isinstance(data[0], int) and 0 <= data[0] < len(self._uris)
        ):
            return lens  # not one of ours: left as it is
        uri, kernel, index = self._uris[data[0]], str(data[1]), data[2]
        source: DocumentAnalysis | _Outline | None = self._analyses.get(uri) or self._outlines.get(uri)
        state = None
        if source is not None:
            state = next(self._lens_states(uri, source, self.jobs.kernels(uri), only=kernel), None)
        lens.command = lenses.resolved(uri, state, index if isinstance(index, int) else -1)
        return lens

    async def first_look(self, uri: str) -> None:
        """Find where a document's kernels are, for its lenses before its first analysis."""
        path = _path(uri)
        if path is None or not uri.endswith(SOURCE_SUFFIXES) or uri in self._analyses:
            return
        document = self.server.workspace.get_text_document(uri)
        text, version = document.source, document.version

        def look() -> tuple[_Outline, frozenset[str], Serialized]:
            outline = _Outline(version, scan_kernels(text, str(path)))  # the analysis re-uses this parse
            tuning = self.jobs.kernels(uri)
            return outline, tuning, self._render_lenses(uri, outline, tuning)

        outline, tuning, lens_text = await self.in_thread(look)
        if uri not in self._analyses:
            self._outlines[uri] = outline
            self._lenses[uri] = (outline, tuning, lens_text)

    def current_result(self, analysis: DocumentAnalysis, kernel: str) -> TuneResult:
        """The kernel's stored result when it can be applied; raises CutuneError saying why not."""
        view = analysis.view(kernel)
        if view is None or view.result is None:
            raise CutuneError("it has no stored result: autotune it first")
        if view.stale:
            raise CutuneError("its result is stale (the source changed since it was tuned): autotune it again")
        if not view.result.significant:
            raise CutuneError("tuning found no significant gain over the original: nothing to apply")
        return view.result

    def _lens_states(
        self, uri: str, source: DocumentAnalysis | _Outline, tuning: frozenset[str], only: str | None = None
    ) -> Iterator[KernelLensState]:
        """What each kernel's lenses show (or the one kernel `only`'s): from an analysis, or from a first look."""
        if isinstance(source, DocumentAnalysis):
            specified = specified_kernels(source.path)
            views = source.kernels if only is None else [v for v in [source.view(only)] if v is not None]
            for v in views:
                yield KernelLensState(
                    v.name,
                    v.lines()[0],
                    v.struct is not None,
                    v.result,
                    v.stale,
                    v.applied,
                    v.name in tuning,
                    v.name in specified,
                )
            return
        path = _path(uri)
        if path is None:
            return
        specified = specified_kernels(path)
        stored = self.results.stored(path)
        for header in source.headers:
            if only not in (None, header.name):
                continue
            yield KernelLensState(
                header.name,
                header.line,
                header.templatized,
                self.results.get(path, header.name, stored),
                False,
                False,
                header.name in tuning,
                header.name in specified,
            )

    def _current(self, uri: str) -> DocumentAnalysis | None:
        analysis = self._analyses.get(uri)
        document = self.server.workspace.text_documents.get(uri)
        if analysis is None or (document is not None and document.version != analysis.version):
            return None
        return analysis

    async def _analyse(self, uri: str, delay: float, stop: threading.Event) -> DocumentAnalysis | None:
        if delay:
            await asyncio.sleep(delay)
        path = _path(uri)
        if path is None:
            return None
        document = self.server.workspace.get_text_document(uri)
        text, version, results = document.source, document.version, self.results
        whole = uri in self._whole
        previous, previous_found = self._analyses.get(uri), self._diagnostics.get(uri)

        def work() -> tuple[DocumentAnalysis, DocumentDiagnostics, Serialized, list[types.Diagnostic]]:
            # the collector paused throughout, not only while the model is built: with a large file's model
            # alive, the collections the views and diagnostics trigger took half of a 200,000-line analysis
            with collector_paused():
                made = None
                if not whole and previous is not None and previous_found is not None:
                    made = reanalyze(previous, previous_found, text, version, stop.is_set)
                if made is None:
                    analysis = analyze(uri, path, text, version, results, stop.is_set)
                    made = analysis, document_diagnostics(analysis, stop.is_set)
                analysis, found = made
                made_all = analysis, found, found.serialized(uri), spec_diagnostics(analysis)
                settle()
                return made_all

        try:
            analysis, found, published, in_spec = await self._analyser.run(work)
        except Cancelled:  # a newer version replaced it
            return None
        except Exception:  # a bug in the core on some text: keep serving the other features and documents
            log.exception("cannot analyse %s", uri)
            return None
        self._analyses[uri] = analysis
        self._diagnostics[uri] = found
        self._carry_offers(analysis)
        if whole:
            self._whole.discard(uri)
        self._outlines.pop(uri, None)
        self.server.protocol.notify(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, published)
        spec_uri = path_uri(analysis.spec_path)
        self._spec_uris[uri] = spec_uri
        self._publish(spec_uri, in_spec)
        # the lenses after the diagnostics, in the same thread: until they are made, the last ones are answered
        tuning = self.jobs.kernels(uri)
        try:
            lens_text = await self._analyser.run(lambda: self._paused_lenses(uri, analysis, tuning, stop))
        except Cancelled:
            return analysis
        except Exception:
            log.exception("cannot make the lenses of %s", uri)
            return analysis
        if self._analyses.get(uri) is analysis:
            self._lenses[uri] = (analysis, tuning, lens_text)
        asked = analysis.view(self._asked.get(uri, ""))
        # the kernel at the cursor: its actions are likely asked for next (unless a newer version is on its way:
        # making them would hold back its analysis)
        if asked is not None and not stop.is_set():
            self._kernel_offers(analysis, asked)
        self.refresh_lenses()
        return analysis

    def _publish(self, uri: str, diagnostics: list[types.Diagnostic]) -> None:
        self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))

    def refresh_lenses(self) -> None:
        """Ask the editor to request lenses again, where it supports that."""
        workspace = self.server.client_capabilities.workspace
        if workspace is None or workspace.code_lens is None or not workspace.code_lens.refresh_support:
            return
        self.server.workspace_code_lens_refresh(None).add_done_callback(_ignore_failure)

    # jobs

    async def start_job(self, uri: str, kernel: str) -> TuneJob:
        """Queue an autotune job; raises CutuneError when the kernel cannot be tuned now."""
        _, ctx = await self.context(uri, kernel)
        job = self.jobs.reserve(uri, kernel, self.settings.budget.trials)
        await self._begin_progress(job)
        settings = self.settings
        self.jobs.start(job, lambda: tuning_work(ctx, settings))
        self.refresh_lenses()
        return job

    async def _begin_progress(self, job: TuneJob) -> None:
        window = self.server.client_capabilities.window
        if window is None or not window.work_done_progress:
            return
        progress = self.server.work_done_progress
        try:
            await progress.create_async(job.id)
        except Exception as e:  # no progress UI: the job runs all the same
            log.warning("cannot create work-done progress: %s", e)
            return
        progress.tokens[job.id].add_done_callback(lambda _: job.cancel.set())  # cancelled from the editor
        title = f"Autotune {job.status.kernel}"
        progress.begin(
            job.id, types.WorkDoneProgressBegin(title=title, cancellable=True, message="queued", percentage=0)
        )

    def _job_changed_in_thread(self, job: TuneJob) -> None:
        if self._loop is None:
            return
        try:
            self._loop.call_soon_threadsafe(self._job_changed, job, job.status)
        except RuntimeError:  # the loop closed: the server is exiting and nobody is listening
            job.cancel.set()

    def _job_changed(self, job: TuneJob, status: JobStatus) -> None:
        self._report_progress(job, status)
        self.server.protocol.notify(JOB_STATUS, status.to_json())
        if status.finished:
            if status.uri in self.server.workspace.text_documents:
                self.refresh(status.uri)
            if status.state is JobState.FAILED:
                self.message(f"autotune of {status.kernel} failed: {status.message}", types.MessageType.Warning)

    def _report_progress(self, job: TuneJob, status: JobStatus) -> None:
        progress = self.server.work_done_progress
        if job.id not in progress.tokens:
            return  # the client has no progress UI, or the job was reserved before its token existed
        if status.finished:
            progress.tokens.pop(job.id)
            progress.end(job.id, types.WorkDoneProgressEnd(message=status.message))
            return
        percentage = int(100 * status.done / status.budget) if status.budget else None
        progress.report(job.id, types.WorkDoneProgressReport(message=status.message, percentage=percentage))


@dataclass(frozen=True, eq=False)
class _Outline:
    """A first look at one version of a document: where its kernels are."""

    version: int | None
    headers: tuple[KernelHeader, ...]


def settle() -> None:
    """Take what is alive now out of the cycle collector's reach (`gc.freeze`): a large file's analysis leaves
    millions of long-lived objects, and each collection walked them all again, holding every thread back (at
    200,000 lines, 0.5 to 0.7 s a collection, collecting nothing). They are still freed when no longer used
    (reference counting); only cycles among them would stay, and an analysis makes none."""
    gc.freeze()


def settled(value: _T) -> _T:
    """`value`, after `settle()`."""
    settle()
    return value


def _path(uri: str) -> Path | None:
    path = to_fs_path(uri)
    return Path(path) if path is not None else None


def _ignore_failure(future: asyncio.Future[Any] | Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.debug("the client failed a refresh request: %s", future.exception())
