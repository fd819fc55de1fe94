"""The cutune language server: LSP requests and notifications → the core, through small helpers."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import TYPE_CHECKING, Any

import attrs
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInternalError
from pygls.lsp.server import LanguageServer

from cutune import __version__
from cutune.agent.view import results_view
from cutune.errors import CutuneError
from cutune.lsp import describe, lenses
from cutune.lsp.actions import KINDS
from cutune.lsp.capture import capture_launches
from cutune.lsp.edits import Edit
from cutune.lsp.process import start_early
from cutune.lsp.session import Session
from cutune.lsp.stdio import serve_stdio
from cutune.lsp.wire import Protocol, Serialized
from cutune.project import stored_result, tune_options

if TYPE_CHECKING:
    from pygls.server import ServerErrors

log = logging.getLogger(__name__)

RESULTS_VIEW = "cutune.resultsView"  # the data of the editor's results view


@attrs.define
class KernelArgs:
    """The argument of every cutune command."""

    uri: str
    kernel: str = ""


NO_ARGS = KernelArgs(uri="")  # a command sent without arguments: answered as for a document that is not open


class CutuneServer(LanguageServer):
    """A pygls server holding one Session (documents, analyses, jobs, settings)."""

    def __init__(self) -> None:
        super().__init__("cutune", __version__, protocol_cls=Protocol)
        self.session = Session(self)

    def report_server_error(self, error: Exception, source: ServerErrors) -> None:
        """Log what the client sent wrong (bad JSON, bad params, a change to an unopened document): the
        user did nothing wrong, so no pop-up; and keep serving (pygls's default would stop the server)."""
        log.warning("ignored a message the server could not handle (%s): %s", source.__name__, error)

    async def apply(self, edit: Edit) -> bool:
        """Ask the editor to apply a workspace edit (one undoable step); True when it did."""
        try:
            params = types.ApplyWorkspaceEditParams(edit=edit.edit, label=edit.title)
            result = await self.workspace_apply_edit_async(params)
        except Exception as e:  # the client refused or failed the request: tell the user, keep serving
            self.session.message(f"the editor did not apply the edit: {e}", types.MessageType.Warning)
            return False
        if not result.applied:  # e.g. the document changed meanwhile: say so, a click must never do nothing silently
            why = f": {result.failure_reason}" if result.failure_reason else ""
            self.session.message(f"the editor did not apply the edit{why}", types.MessageType.Warning)
        elif edit.note:
            self.session.message(edit.note, types.MessageType.Info)
        return result.applied


server = CutuneServer()


@server.feature(types.INITIALIZE)
def initialize(ls: CutuneServer, params: types.InitializeParams) -> None:
    """Read the settings sent as initialization options."""
    ls.session.attach(asyncio.get_running_loop())
    ls.session.configure(params.initialization_options)


@server.feature(types.INITIALIZED)
async def initialized(ls: CutuneServer, params: types.InitializedParams) -> None:
    """Watch spec and result files, so that edits outside the editor show up."""
    await ls.session.watch_files()


@server.feature(types.SHUTDOWN)
def shutdown(ls: CutuneServer, params: None) -> None:
    """Cancel the autotune jobs (their finished trials are kept in the study) and the analyses."""
    ls.session.shutdown()


@server.feature(types.EXIT)
def exit_(ls: CutuneServer, params: None) -> None:
    """Stop what still runs (an `exit` may come without a `shutdown`): the process ends at once."""
    shutdown(ls, params)


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(ls: CutuneServer, params: types.DidChangeConfigurationParams) -> None:
    """Read the `cutune` section again."""
    await ls.session.reload_settings(params.settings)


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def did_change_watched_files(ls: CutuneServer, params: types.DidChangeWatchedFilesParams) -> None:
    """A spec or a stored result changed: analyse the open documents again."""
    ls.session.refresh_all()


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: CutuneServer, params: types.DidOpenTextDocumentParams) -> None:
    """Analyse a newly opened document in the background."""
    ls.session.refresh(params.text_document.uri, delay=ls.session.OPEN_DELAY_S)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: CutuneServer, params: types.DidChangeTextDocumentParams) -> None:
    """Analyse again once typing pauses."""
    ls.session.refresh(params.text_document.uri, delay=ls.session.CHANGE_DELAY_S, edited=True)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: CutuneServer, params: types.DidSaveTextDocumentParams) -> None:
    """Analyse again (the spec beside it may have changed too)."""
    ls.session.refresh(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: CutuneServer, params: types.DidCloseTextDocumentParams) -> None:
    """Forget the document and clear its diagnostics."""
    ls.session.close(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=True))
async def code_lens(ls: CutuneServer, params: types.CodeLensParams) -> list[types.CodeLens] | Serialized:
    """Lenses above each kernel, from the last analysis or, before the first, from a quick look."""
    return await ls.session.code_lenses(params.text_document.uri)


@server.feature(lenses.VISIBLE_RANGES)
def visible_ranges(ls: CutuneServer, params: Any) -> None:
    """The lines an editor shows of a document (cutune's notification: docs/protocol.md); bad params are ignored."""
    uri, ranges = lenses.shown_lines(params)
    if uri is not None:
        ls.session.visible(uri, ranges)


@server.feature(types.CODE_LENS_RESOLVE)
def code_lens_resolve(ls: CutuneServer, lens: types.CodeLens) -> types.CodeLens:
    """A lens's command: lenses come without one, and the editor resolves those it shows."""
    return ls.session.resolve_lens(lens)


@server.feature(types.TEXT_DOCUMENT_HOVER)
async def on_hover(ls: CutuneServer, params: types.HoverParams) -> types.Hover | None:
    """Candidates, tuned value and importance of the tunable parameter under the cursor (from the last
    analysis: an older version's answers at once rather than the current one's after a wait)."""
    return await ls.session.hover(params.text_document.uri, params.position)


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(code_action_kinds=KINDS))
async def code_action(ls: CutuneServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """Templatize, draft the spec, apply the tuned configuration, rewrite as a variant."""
    return await ls.session.code_actions(params)


@server.command(lenses.TEMPLATIZE)
async def templatize(ls: CutuneServer, args: KernelArgs = NO_ARGS) -> dict[str, object]:
    """Rewrite the kernel with explicit parameters and draft its spec, as one workspace edit."""
    try:
        edit, params = await ls.session.templatize_edit(args.uri, args.kernel)
    except CutuneError as e:
        ls.session.message(f"cannot templatize {args.kernel}: {e}", types.MessageType.Warning)
        return {"applied": False, "params": []}
    if edit is None:
        ls.session.message(f"{args.kernel} is templatized and has its spec already", types.MessageType.Info)
        return {"applied": False, "params": params}
    return {"applied": await ls.apply(edit), "params": params}


@server.command(lenses.AUTOTUNE)
async def autotune(ls: CutuneServer, args: KernelArgs = NO_ARGS) -> dict[str, object]:
    """Queue a background autotune job, with cancellable work-done progress."""
    try:
        job = await ls.session.start_job(args.uri, args.kernel)
    except CutuneError as e:
        ls.session.message(f"cannot autotune {args.kernel}: {e}", types.MessageType.Warning)
        return {"job": None, "refused": str(e)}
    return {"job": job.id}


@server.command(lenses.APPLY)
async def apply(ls: CutuneServer, args: KernelArgs = NO_ARGS) -> dict[str, object]:
    """Write the tuned configuration into the source, as one workspace edit."""
    try:
        edit = await ls.session.apply_edit(args.uri, args.kernel)
    except CutuneError as e:
        ls.session.message(f"cannot apply to {args.kernel}: {e}", types.MessageType.Warning)
        return {"applied": False}
    return {"applied": await ls.apply(edit)}


@server.command(lenses.CANCEL)
def cancel(ls: CutuneServer, args: KernelArgs = NO_ARGS) -> dict[str, object]:
    """Stop the kernel's autotune job after its current trial."""
    return {"cancelled": ls.session.jobs.cancel(args.uri, args.kernel)}


@server.command(lenses.SHOW_RESULTS)
async def show_results(ls: CutuneServer, args: KernelArgs = NO_ARGS) -> dict[str, object]:
    """The stored results of a kernel (or of every kernel of the file) as Markdown."""
    summary = await ls.session.analysis(args.uri)
    names = summary.names if summary is not None else ()
    stored = [summary.result(n) for n in names if args.kernel in ("", n)] if summary is not None else []
    parts = [describe.result_markdown(result, stale) for result, stale, _ in stored if result is not None]
    return {"markdown": "\n\n".join(parts) or f"no stored results for {args.kernel or args.uri}"}


@server.command(lenses.CAPTURE)
async def capture(ls: CutuneServer, args: KernelArgs) -> dict[str, object]:
    """Run `cutune.capture.command` under the launch recorder and write the specs of the kernels it launched."""
    try:
        outcome = await capture_launches(ls, args.uri)
    except CutuneError as e:
        ls.session.message(f"cannot capture launches: {e}", types.MessageType.Warning)
        return {"specs": [], "errors": [], "refused": str(e)}
    for error in outcome.errors:
        ls.session.message(error, types.MessageType.Warning)
    written = [{"kernel": k.kernel, "spec": str(k.path.with_suffix(".tune.toml")), "sizes": len(k.spec.sizes)}
               for k in outcome.kernels]  # fmt: skip
    ls.session.message(f"captured {len(written)} kernel spec(s); Autotune uses them", types.MessageType.Info)
    ls.session.refresh_all()
    return {"specs": written, "errors": list(outcome.errors)}


@server.command(RESULTS_VIEW)
async def results_view_data(ls: CutuneServer, args: KernelArgs = NO_ARGS) -> dict[str, object]:
    """The results view's data: per-size times against the floor, the trial history and the agent's steps."""
    try:
        ctx = await ls.session.context(args.uri, args.kernel)
    except CutuneError as e:
        return {"kernel": args.kernel, "message": str(e), "sizes": [], "trials": [], "steps": []}
    url = tune_options(ctx, trials=1, seconds=None, storage_url=ls.session.settings.storage_url or None).storage()
    # the stored result as it is now on disk: the analysis may not have caught up with a job that just ended
    return await ls.session.in_thread(lambda: results_view(ctx, stored_result(ctx), url))


def tcp_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (or `:PORT`, on 127.0.0.1) as a host and a port; raises CutuneError when it is not one."""
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise CutuneError(f"--tcp {text!r}: expected HOST:PORT with a port from 1 to 65535, e.g. 127.0.0.1:2087")
    return host.strip("[]") or "127.0.0.1", int(port)


def _no_client_tracebacks(record: logging.LogRecord) -> bool:
    """Drop pygls's traceback of a request the client got wrong (e.g. a command's malformed arguments): the
    client gets the error, and `report_server_error` logs one line. Tracebacks of the server's own bugs stay."""
    error = record.exc_info[1] if record.exc_info else None
    return not isinstance(error, JsonRpcException) or isinstance(error, JsonRpcInternalError)


def start(tcp: tuple[str, int] | None) -> None:
    """Serve LSP on stdio, or on TCP at (host, port)."""
    logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("pygls.protocol.json_rpc").addFilter(_no_client_tracebacks)
    # an autotune job's thread runs Python for long stretches: hand the event loop the GIL more often than
    # every 5 ms, so that requests are not kept waiting
    sys.setswitchinterval(0.001)
    start_early()  # before any thread starts
    if tcp is None:
        serve_stdio(server)
        return
    try:
        server.start_tcp(*tcp)
    except OSError as e:  # the port is taken, the host unknown
        raise CutuneError(f"cannot listen on {tcp[0]}:{tcp[1]}: {e.strerror or e}") from None
