"""The server's state: settings, analyses of open documents, stored results and autotune jobs."""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from lsprotocol import types
from pygls.uris import to_fs_path

from cutune.agent.settings import api_key_from_env
from cutune.cuda.edit import Overlaps
from cutune.errors import CutuneError
from cutune.lsp import lenses
from cutune.lsp.actions import Offer, actions_for, moved_offers
from cutune.lsp.capture import specified_kernels
from cutune.lsp.edits import Edit
from cutune.lsp.host import Analysed
from cutune.lsp.jobs import JOB_STATUS, Jobs, JobState, JobStatus, TuneJob, tuning_work
from cutune.lsp.lenses import Window
from cutune.lsp.process import ANALYSIS, REQUESTS, AnalysisProcess, HostFailed
from cutune.lsp.settings import Settings, parse_settings
from cutune.lsp.summary import Summary
from cutune.lsp.wire import Serialized
from cutune.lsp.worker import Cancelled, Worker
from cutune.project import KernelContext, open_kernel
from cutune.tune.result import TuneResult

if TYPE_CHECKING:  # the server imports this module
    from cutune.lsp.server import CutuneServer

log = logging.getLogger(__name__)
_T = TypeVar("_T")

SOURCE_SUFFIXES = (".cu", ".cuh")
WATCHED = ("**/*.tune.toml", "**/.cutune/results/*.json")


class Session:
    """Everything one server knows between requests. The documents' analyses live in the analysis process
    (lsp/host.py): this one keeps what requests are answered from (a `Summary`, lenses and diagnostics as JSON,
    code actions' edits), so that they never wait for an analysis's CPU or GIL."""

    CHANGE_DELAY_S = 0.15  # analyse once typing pauses this long
    # start after the editor's first requests; the first look that answers them (lsp/scan.py) leaves its tree
    # for the analysis to re-use
    OPEN_DELAY_S = 0.25
    # a kernel's code actions are computed once per document version, off the request path; a request waits
    # this long for them, then answers with none (the editor asks again as the cursor moves): a kernel's first
    # offers take from 0.1 s to seconds in a large file, and a request waiting for them held the editor back
    ACTIONS_WAIT_S = 0.01
    LISTS_KEPT = 4  # a document's last lists of lenses whose lenses can still be resolved
    WINDOW_MARGIN = 2000  # lines above and below the shown ones that get lenses too: scrolling within needs none

    def __init__(self, server: CutuneServer) -> None:
        self.server = server
        self.settings = Settings()
        self.jobs = Jobs(self._job_changed_in_thread)
        self.host = AnalysisProcess(self._host_lost)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._summaries: dict[str, Summary] = {}  # each document's last analysis (of any version) or first look
        self._whole: set[str] = set()  # documents whose next analysis must be whole (more than their text changed)
        self._pending: dict[str, asyncio.Task[Summary | None]] = {}
        self._asked: dict[str, str] = {}  # the kernel each document's last code actions were asked for
        self._offers: dict[tuple[str, int | None, str], asyncio.Future[list[Offer] | None]] = {}
        # each kernel's last offers, and the version they were made for
        self._made: dict[tuple[str, str], tuple[int | None, list[Offer] | None]] = {}
        # each document's lenses, and the summary, the jobs and the window they were made from
        self._lenses: dict[str, tuple[Summary, frozenset[str], Window | None, Serialized]] = {}
        self._windows: dict[str, Window] = {}  # the lines near those an editor shows, of documents it said
        self._republish: dict[str, asyncio.Future[None]] = {}  # each document's last publication for a new window
        self._lists: dict[int, tuple[str, Summary]] = {}  # a list of lenses (`lenses.lens_key`) → what it showed
        self._list_numbers = itertools.count()
        self._context: tuple[tuple[str, int | None, str], KernelContext] | None = None  # the last one made here
        self._requests = Worker("cutune-requests")  # requests' own work in this process (a kernel's context)
        self._spec_uris: dict[str, str] = {}  # document → the spec file it published diagnostics to

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Remember the event loop, for notifications from the job thread; start the analysis process."""
        self._loop = loop
        self.host.start(loop)

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

    # documents and their analyses (made in the analysis process: lsp/host.py)

    def refresh(self, uri: str, delay: float = 0.0, *, edited: bool = False) -> None:
        """Analyse a document again in the background, then publish its diagnostics and refresh lenses; an
        analysis of an older version still running is stopped. An `edited` document (nothing else changed: specs,
        results, settings) is analysed from its last analysis where the edit allows (lsp/incremental.py)."""
        if not uri.endswith(SOURCE_SUFFIXES):
            return
        if not edited:
            self._whole.add(uri)
        self._stop(uri)
        self._pending[uri] = asyncio.ensure_future(self._analyse(uri, delay))

    def refresh_all(self) -> None:
        """Analyse every open CUDA document again."""
        for uri in list(self.server.workspace.text_documents):
            self.refresh(uri)

    def shutdown(self) -> None:
        """Stop the analyses and the jobs (their finished trials are kept in the study); end the analysis process."""
        for uri in list(self._pending):
            self._stop(uri)
        self.jobs.shutdown()
        self.host.kill()

    def _stop(self, uri: str) -> None:
        self.host.stop(uri)
        pending = self._pending.get(uri)
        if pending is not None and not pending.done():
            pending.cancel()

    def close(self, uri: str) -> None:
        """Forget a document; clear what it published."""
        self._stop(uri)
        self.host.call(ANALYSIS, "close", uri).add_done_callback(_ignore_failure)
        self._pending.pop(uri, None)
        self._summaries.pop(uri, None)
        self._whole.discard(uri)
        self._lenses.pop(uri, None)
        self._windows.pop(uri, None)
        if (republishing := self._republish.pop(uri, None)) is not None:
            republishing.cancel()
        self._asked.pop(uri, None)
        self._made = {k: v for k, v in self._made.items() if k[0] != uri}
        self._offers = {k: v for k, v in self._offers.items() if k[0] != uri}
        self._lists = {k: v for k, v in self._lists.items() if v[0] != uri}
        for target in (uri, self._spec_uris.pop(uri, None)):
            if target is not None:
                self._publish(target, [])

    async def analysis(self, uri: str) -> Summary | None:
        """The summary of the document's current version (waiting for its analysis if need be)."""
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

    async def latest(self, uri: str) -> Summary | None:
        """The document's last analysis's summary at once, even of an older version; waits only when it has none."""
        summary = self._summaries.get(uri)
        return summary if summary is not None and summary.analysed else await self.analysis(uri)

    async def in_thread(self, work: Callable[[], _T]) -> _T:
        """Run a request's heavy part in this process's requests thread."""
        return await self._requests.run(work)

    async def context(self, uri: str, kernel: str) -> KernelContext:
        """One kernel's context in the document's current text, made here (an autotune job and the results view
        need it in this process: it holds a tree-sitter tree, which does not cross processes); raises CutuneError
        when there is none."""
        path = _path(uri)
        document = self.server.workspace.text_documents.get(uri)
        if path is None or document is None or not uri.endswith(SOURCE_SUFFIXES):
            raise CutuneError(f"{uri} is not an open CUDA document")
        key, text = (uri, document.version, kernel), document.source
        if self._context is None or self._context[0] != key:
            self._context = key, await self.in_thread(lambda: open_kernel(path, kernel, text=text))
        return self._context[1]

    async def hover(self, uri: str, position: types.Position) -> types.Hover | None:
        """The hover at a position, from the last analysis (an older version's at once rather than the current
        one's after a wait)."""
        if await self.latest(uri) is None:
            return None
        try:
            found: types.Hover | None = await self.host.call(REQUESTS, "hover", uri, position)
        except (Cancelled, HostFailed):
            return None
        return found

    async def templatize_edit(self, uri: str, kernel: str) -> tuple[Edit | None, list[str]]:
        """A kernel's templatize edit (None when there is nothing to do) and its parameters; raises CutuneError."""
        found: tuple[Edit | None, list[str]] = await self._command("templatize", uri, kernel)
        return found

    async def apply_edit(self, uri: str, kernel: str) -> Edit:
        """The edit writing a kernel's stored result into the source; raises CutuneError when it cannot."""
        summary = await self.analysis(uri)
        if summary is not None:
            self.current_result(summary, kernel)
        edit: Edit = await self._command("apply", uri, kernel)
        return edit

    async def _command(self, method: str, uri: str, kernel: str) -> Any:
        summary = await self.analysis(uri)
        if summary is None:
            raise CutuneError(f"{uri} is not an open CUDA document")
        try:
            return await self.host.call(REQUESTS, method, uri, summary.version, kernel)
        except Cancelled:
            raise CutuneError("the document's analysis stopped meanwhile: try again") from None

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        """The code actions at a range, from the document's last analysis; a kernel's offers are made once per
        version in the analysis process, and waited for at most ACTIONS_WAIT_S."""
        uri = params.text_document.uri
        summary = await self.latest(uri)
        kernel = summary.at(params.range.start.line) if summary is not None else None
        if summary is None or kernel is None:
            return []
        self._asked[uri] = kernel
        earlier = self._made.get((uri, kernel))
        pending = self._pending.get(uri)
        if earlier is not None and pending is not None and not pending.done():
            # while a newer version is analysed, its offers are not begun: they would hold its analysis back (at
            # 200,000 lines a kernel's offers take seconds), and it makes them for this kernel when it ends
            return _actions(kernel, earlier[1], params)
        offers = self._kernel_offers(uri, summary.version, kernel)
        if not offers.done() and earlier is not None:
            # an earlier version's offers at once: their edits name the version they were made for, which the
            # editor refuses to apply to another
            return _actions(kernel, earlier[1], params)
        try:
            found = await asyncio.wait_for(asyncio.shield(offers), self.ACTIONS_WAIT_S)
        except (TimeoutError, Cancelled, HostFailed):  # not made yet, replaced by a newer version's, or a bug
            return []
        except asyncio.CancelledError:
            if not offers.cancelled():
                raise  # the request itself was cancelled
            return []
        return _actions(kernel, found, params)

    def _kernel_offers(self, uri: str, version: int | None, kernel: str) -> asyncio.Future[list[Offer] | None]:
        """A kernel's offers in a version, made once in the analysis process."""
        key = (uri, version, kernel)
        offers = self._offers.get(key)
        if offers is None or (offers.done() and (offers.cancelled() or offers.exception() is not None)):
            for k, f in self._offers.items():
                if k[0] == uri and k[1] != version:
                    # an older version's, not begun: skipped (it would hold back the analyses); one under way
                    # ends, and its offers answer until these are made (cancelled, they were lost: at 200,000
                    # lines a kernel's offers take longer than the pause between two edits, and none were made)
                    self.host.skip(f)
            self._offers = {k: f for k, f in self._offers.items() if k[0] != uri or k[1] == version}
            offers = self._offers[key] = self.host.call(REQUESTS, "offers", uri, version, kernel)
            offers.add_done_callback(lambda done: self._keep_offers(uri, version, kernel, done))
        return offers

    def _carry_offers(self, uri: str, summary: Summary) -> None:
        """The offers made for the version an analysis was made from, moved to its version, for the kernels above
        the edit it did not look at again: their code actions answer at once, without being made again (at
        200,000 lines that takes seconds). Not those below: a variant's rewrite names lines of its kernel, which
        the edit moved."""
        if summary.moved_from is None:
            return
        version, edit, again = summary.moved_from
        for (made_in, kernel), (made, found) in list(self._made.items()):
            lines = summary.lines(kernel)
            if made_in != uri or made != version or kernel in again or lines is None or lines[1] >= edit.start_at.line:
                continue
            try:
                moved = None if found is None else moved_offers(found, uri, summary.version, edit)
            except Overlaps:
                continue
            self._made[(uri, kernel)] = (summary.version, moved)
            future: asyncio.Future[list[Offer] | None] = asyncio.get_running_loop().create_future()
            future.set_result(moved)
            self._offers[(uri, summary.version, kernel)] = future

    def _keep_offers(
        self, uri: str, version: int | None, kernel: str, done: asyncio.Future[list[Offer] | None]
    ) -> None:
        """Remember a kernel's last offers made, for the requests of later versions until theirs are made."""
        if not done.cancelled() and done.exception() is None and uri in self._summaries:
            self._made[(uri, kernel)] = (version, done.result())

    async def code_lenses(self, uri: str) -> Serialized:
        """The lenses of every kernel, from the last analysis or, before the first, from a first look. Made by the
        analysis process after each analysis (the last ones are answered meanwhile), and on request only before
        the first analysis, or when a job starts or ends."""
        tuning = self.jobs.kernels(uri)
        summary = self._summaries.get(uri)
        window = self._window(uri, summary) if summary is not None else None
        cached = self._lenses.get(uri)
        if cached is not None and cached[1:3] == (tuning, window):
            return cached[3]
        try:
            if summary is None:
                await self._first_look(uri, tuning)
            else:
                listed = self._list(uri, summary)
                lens_text = await self.host.call(REQUESTS, "lenses", uri, summary.version, tuning, listed, window)
                if self._summaries.get(uri) is summary:
                    self._lenses[uri] = (summary, tuning, window, lens_text)
        except (Cancelled, HostFailed):  # a newer version's lenses are on their way; meanwhile the last ones
            pass
        cached = self._lenses.get(uri)
        return cached[3] if cached is not None else Serialized("[]")

    def visible(self, uri: str, ranges: Sequence[tuple[int, int]]) -> None:
        """The lines (first, last) an editor shows of a document: a document of more than `lenses.WINDOWED_FROM`
        kernels gets the lenses and the tunable-literal hints of the kernels there and WINDOW_MARGIN lines around;
        when the shown lines leave that window, the editor is asked for lenses again and the last analysis's
        diagnostics are published again with the new window's hints."""
        if not ranges:
            return
        first, last = min(r[0] for r in ranges), max(r[1] for r in ranges)
        window = self._windows.get(uri)
        if window is not None and window[0] <= first and last <= window[1]:
            return
        self._windows[uri] = (max(0, first - self.WINDOW_MARGIN), last + self.WINDOW_MARGIN)
        summary = self._summaries.get(uri)
        if summary is not None and self._window(uri, summary) is not None:
            self.refresh_lenses()
            if summary.analysed:
                self._republish[uri] = asyncio.ensure_future(self._publish_again(uri, summary))

    async def _publish_again(self, uri: str, summary: Summary) -> None:
        """The diagnostics of the analysis `summary` comes from, with the hints of the document's window now."""
        try:
            published = await self.host.call(REQUESTS, "diagnostics", uri, summary.version, self._windows.get(uri))
        except (Cancelled, HostFailed):  # a newer analysis publishes its own
            return
        if self._summaries.get(uri) is summary:
            self.server.protocol.notify(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, published)

    def _window(self, uri: str, summary: Summary) -> Window | None:
        """The lines whose kernels get lenses (None: all)."""
        return lenses.windowed(len(summary.names), self._windows.get(uri))

    async def _first_look(self, uri: str, tuning: frozenset[str]) -> None:
        """Find where a document's kernels are, for its lenses before its first analysis."""
        path = _path(uri)
        if path is None or not uri.endswith(SOURCE_SUFFIXES):
            return
        document = self.server.workspace.get_text_document(uri)
        listed = next(self._list_numbers)
        shown = self._windows.get(uri)  # applied by the look once it has counted the kernels
        source, version = document.source, document.version
        summary, lens_text = await self.host.call(REQUESTS, "look", uri, path, source, version, tuning, listed, shown)
        self._keep_list(listed, uri, summary)
        if uri not in self._summaries:  # else an analysis came first
            self._summaries[uri] = summary
            self._lenses[uri] = (summary, tuning, self._window(uri, summary), lens_text)
            keep()

    def _list(self, uri: str, summary: Summary) -> int:
        """The number of a new list of a document's lenses, made from `summary`."""
        listed = next(self._list_numbers)
        self._keep_list(listed, uri, summary)
        return listed

    def _keep_list(self, listed: int, uri: str, summary: Summary) -> None:
        self._lists[listed] = uri, summary
        mine = [n for n, (u, _) in self._lists.items() if u == uri]
        for n in mine[: -self.LISTS_KEPT]:
            del self._lists[n]

    def resolve_lens(self, lens: types.CodeLens) -> types.CodeLens:
        """A lens with its command, from what its kernel shows now (`lenses.lenses_json` sent it without)."""
        key = lens.data[0] if isinstance(lens.data, list) and lens.data else None
        if not isinstance(key, int) or isinstance(key, bool):
            return lens  # not one of ours: left as it is
        listed, at, index = lenses.lens_place(key)
        uri, made_from = self._lists.get(listed, ("", None))
        summary = self._summaries.get(uri)
        state = None
        if made_from is not None and at < len(made_from.names) and summary is not None:
            path = _path(uri)
            specified = specified_kernels(path) if path is not None else frozenset()
            state = next(summary.lens_states(self.jobs.kernels(uri), specified, only=made_from.names[at]), None)
        lens.command = lenses.resolved(uri, state, index)
        return lens

    def current_result(self, summary: Summary, kernel: str) -> TuneResult:
        """The kernel's stored result when it can be applied; raises CutuneError saying why not."""
        result, stale, _ = summary.result(kernel)
        if result is None:
            raise CutuneError("it has no stored result: autotune it first")
        if stale:
            raise CutuneError("its result is stale (the source changed since it was tuned): autotune it again")
        if not result.significant:
            raise CutuneError("tuning found no significant gain over the original: nothing to apply")
        return result

    def _current(self, uri: str) -> Summary | None:
        summary = self._summaries.get(uri)
        document = self.server.workspace.text_documents.get(uri)
        if summary is None or not summary.analysed or (document is not None and document.version != summary.version):
            return None
        return summary

    async def _analyse(self, uri: str, delay: float) -> Summary | None:
        if delay:
            await asyncio.sleep(delay)
        path = _path(uri)
        if path is None:
            return None
        document = self.server.workspace.get_text_document(uri)
        whole = uri in self._whole
        window = self._windows.get(uri)
        try:
            analysed: Analysed = await self.host.call(
                ANALYSIS, "analyse", uri, path, document.source, document.version, whole, window
            )
        except Cancelled:  # a newer version replaced it (or the process died: every document is analysed again)
            return None
        except (CutuneError, HostFailed) as e:  # a bug in the core on some text: keep serving the rest
            log.error("cannot analyse %s: %s", uri, e)
            return None
        summary, published, spec_uri, in_spec = analysed
        self._summaries[uri] = summary
        keep()
        self._carry_offers(uri, summary)
        if whole:
            self._whole.discard(uri)
        self.server.protocol.notify(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, published)
        if self._windows.get(uri) != window and self._window(uri, summary) is not None:  # the view moved meanwhile
            self._republish[uri] = asyncio.ensure_future(self._publish_again(uri, summary))
        self._spec_uris[uri] = spec_uri
        self._publish(spec_uri, in_spec)
        # the lenses after the diagnostics, in the same thread: until they are made, the last ones are answered
        tuning, window = self.jobs.kernels(uri), self._window(uri, summary)
        try:
            listed = self._list(uri, summary)
            lens_text = await self.host.call(ANALYSIS, "lenses", uri, summary.version, tuning, listed, window)
        except (Cancelled, HostFailed):
            return summary
        if self._summaries.get(uri) is summary:
            self._lenses[uri] = (summary, tuning, window, lens_text)
        # the kernel at the cursor: its actions are likely asked for next
        asked = self._asked.get(uri)
        if asked is not None and summary.index(asked) is not None:
            self._kernel_offers(uri, summary.version, asked)
        self.refresh_lenses()
        return summary

    def _host_lost(self, message: str, restarted: bool) -> None:
        """The analysis process died: tell the user; analyse the open documents again in the new one (the last
        results stay shown meanwhile, or for good when there is none)."""
        if not restarted:
            self.message(f"{message} (the last results stay shown)", types.MessageType.Error)
            return
        self.message(message, types.MessageType.Warning)
        self.refresh_all()

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
        ctx = await self.context(uri, kernel)
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


def keep() -> None:
    """Take what is alive now (a new summary: a 200,000-line file's is 20,000 kernels' rows) out of the cycle
    collector's reach (`gc.freeze`): a collection walking it all took 48 ms of the event loop, collecting nothing.
    It is still freed when no longer used (reference counting); a summary makes no cycles."""
    gc.freeze()


def _actions(kernel: str, offers: list[Offer] | None, params: types.CodeActionParams) -> list[types.CodeAction]:
    return [] if offers is None else actions_for(kernel, offers, params)


def _path(uri: str) -> Path | None:
    path = to_fs_path(uri)
    return Path(path) if path is not None else None


def _ignore_failure(future: asyncio.Future[Any] | Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.debug("the client failed a refresh request: %s", future.exception())
