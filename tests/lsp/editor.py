"""A scripted editor for the language-server tests: opens documents, applies edits, collects notifications."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.workspace import TextDocument
from pytest_lsp import LanguageClient, client_capabilities

from cutune.lsp.lenses import VISIBLE_RANGES

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "lsp"
LANGUAGE = "cuda-cpp"
TIMEOUT_S = 20.0
METHODS = (
    types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
    "cutune/jobStatus",
    types.WORKSPACE_CODE_LENS_REFRESH,
    types.CLIENT_REGISTER_CAPABILITY,
    types.WORKSPACE_APPLY_EDIT,
    types.WORKSPACE_CONFIGURATION,
)  # handled by the Editor, not by pytest-lsp's defaults


# fixtures that only differ in their spec share the kernel of another: the original (lenses) or templatized
SHARED_KERNEL = {
    "diagnostics/plain": "lenses",
    "diagnostics/spec_missing": "autotune",
    "diagnostics/spec_invalid": "autotune",
    "diagnostics/bad_toml": "autotune",
}


def copy_workspace(feature: str, tmp_path: Path) -> Path:
    """A fresh workspace with the fixture files of `feature` (and `.cutune/`, which marks its root)."""
    root = tmp_path / "workspace"
    if (DATA / feature).is_dir():
        shutil.copytree(DATA / feature, root)
    else:
        root.mkdir()
    if feature in SHARED_KERNEL:
        shutil.copy(DATA / SHARED_KERNEL[feature] / "scale.cu", root / "scale.cu")
    (root / ".cutune").mkdir(exist_ok=True)
    return root


class Editor:
    """Drives the server like an editor would; each test gives it a fresh workspace with `use`."""

    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.root = Path()
        self.documents: dict[str, TextDocument] = {}
        self.published: dict[str, list[list[types.Diagnostic]]] = {}
        self.statuses: list[dict[str, Any]] = []
        self.applied: list[types.ApplyWorkspaceEditParams] = []
        self.accept_edits = True
        self.configuration_requests = 0
        self.lens_refreshes = 0  # `workspace/codeLens/refresh` requests: new lenses are made
        self.registrations: list[types.Registration] = []
        self._messages_seen = 0
        self._register()

    async def start(self, settings: Any = None) -> None:
        """Initialize the server, with `settings` as initialization options."""
        self.client.set_configuration(settings or {}, section="cutune")
        await self.client.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"), initialization_options=settings
            )
        )

    def use(self, root: Path) -> Editor:
        """Work in a new workspace from now on (messages and edits seen so far are forgotten)."""
        self.root = root
        self.applied = []
        self.statuses = []
        self.accept_edits = True
        self._messages_seen = len(self.client.messages)
        return self

    @property
    def messages(self) -> list[types.ShowMessageParams]:
        """The `window/showMessage` notifications since `use`."""
        return self.client.messages[self._messages_seen :]

    async def configure(self, settings: Any) -> None:
        """Change the `cutune` settings and tell the server, which pulls them (wait until it has)."""
        self.client.set_configuration(settings, section="cutune")
        seen = self.configuration_requests
        self.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        await self.wait(lambda: self.configuration_requests > seen)

    def uri(self, name: str) -> str:
        """The URI of a workspace file."""
        return (self.root / name).resolve().as_uri()

    def open(self, name: str, text: str | None = None) -> str:
        """Open a workspace file (its text on disk unless given), version 1."""
        uri = self.uri(name)
        text = (self.root / name).read_text(encoding="utf-8") if text is None else text
        self.documents[uri] = TextDocument(uri, text, version=1)
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id=LANGUAGE, version=1, text=text)
            )
        )
        return uri

    def change(self, uri: str, text: str) -> None:
        """Replace an open document's text (a new version)."""
        doc = self.documents[uri]
        version = (doc.version or 0) + 1
        self.documents[uri] = TextDocument(uri, text, version=version)
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def edit(self, uri: str, at: types.Range, text: str) -> None:
        """Replace a range of an open document with `text`, sent as an incremental change (a new version)."""
        doc = self.documents[uri]
        doc.apply_change(types.TextDocumentContentChangePartial(range=at, text=text))
        doc.version = (doc.version or 0) + 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=doc.version),
                content_changes=[types.TextDocumentContentChangePartial(range=at, text=text)],
            )
        )

    def close(self, uri: str) -> None:
        """Close an open document."""
        del self.documents[uri]
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    def text(self, uri: str) -> str:
        """An open document's current text."""
        return self.documents[uri].source

    async def diagnostics(self, uri: str, since: int = 0) -> list[types.Diagnostic]:
        """The diagnostics published for `uri` after the first `since` publications (waiting for them)."""
        await self.wait(lambda: len(self.published.get(uri, [])) > since)
        return self.published[uri][-1]

    def publications(self, uri: str) -> int:
        """How many times diagnostics were published for `uri`."""
        return len(self.published.get(uri, []))

    def show(self, uri: str, first: int, last: int) -> None:
        """Say which lines of a document the editor shows (`cutune/visibleRanges`, as the extension does)."""
        shown = {"start": {"line": first, "character": 0}, "end": {"line": last, "character": 0}}
        self.client.protocol.notify(VISIBLE_RANGES, {"textDocument": {"uri": uri}, "ranges": [shown]})

    async def lenses(self, uri: str, *, resolve: bool = True) -> list[types.CodeLens]:
        """The code lenses of a document, each resolved (as an editor resolves the lenses it shows)."""
        params = types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
        found = list(await self.client.text_document_code_lens_async(params) or [])
        if not resolve:
            return found
        return [lens if lens.command else await self.client.code_lens_resolve_async(lens) for lens in found]

    async def command(self, command: str, uri: str, kernel: str) -> Any:
        """Run a cutune command with its `{uri, kernel}` argument."""
        params = types.ExecuteCommandParams(command=command, arguments=[{"uri": uri, "kernel": kernel}])
        return await self.client.workspace_execute_command_async(params)

    async def actions(
        self,
        uri: str,
        line: int,
        diagnostics: list[types.Diagnostic] | None = None,
        only: list[str] | None = None,
        *,
        wait: bool = True,
    ) -> list[types.CodeAction]:
        """The code actions at a line; with `wait`, asked again (as an editor does when the cursor moves) until
        there are some: the server answers at once, with none until it has made a kernel's offers."""
        at = types.Range(start=types.Position(line=line, character=0), end=types.Position(line=line, character=0))
        context = types.CodeActionContext(diagnostics=diagnostics or [], only=only)
        params = types.CodeActionParams(text_document=types.TextDocumentIdentifier(uri=uri), range=at, context=context)
        deadline = time.monotonic() + 30
        while True:
            result = [
                a
                for a in await self.client.text_document_code_action_async(params) or []
                if isinstance(a, types.CodeAction)
            ]
            if result or not wait or time.monotonic() > deadline:
                return result
            await asyncio.sleep(0.05)

    async def hover(self, uri: str, line: int, character: int) -> types.Hover | None:
        """Hover at a position."""
        params = types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=character)
        )
        return await self.client.text_document_hover_async(params)

    async def wait(self, condition: Callable[[], bool]) -> None:
        """Wait until `condition` holds (polling), or fail after a while."""
        async with asyncio.timeout(TIMEOUT_S):
            while not condition():
                await asyncio.sleep(0.01)

    def finished(self, kernel: str) -> dict[str, Any] | None:
        """The last final job status of a kernel, if any."""
        done = [s for s in self.statuses if s["kernel"] == kernel and s["state"] in ("done", "failed", "cancelled")]
        return done[-1] if done else None

    def apply_edit(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        """Apply a workspace edit like an editor: files created, open buffers edited (and saved to disk)."""
        self.applied.append(params)
        if not self.accept_edits:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason="declined by the test")
        for change in params.edit.document_changes or []:
            if isinstance(change, types.CreateFile):
                path = _path(change.uri)
                if not path.exists():
                    path.write_text("", encoding="utf-8")
            elif isinstance(change, types.TextDocumentEdit) and not self._edit(change):
                return types.ApplyWorkspaceEditResult(applied=False, failure_reason="version mismatch")
        return types.ApplyWorkspaceEditResult(applied=True)

    def _edit(self, change: types.TextDocumentEdit) -> bool:
        uri = change.text_document.uri
        open_doc = self.documents.get(uri)
        if open_doc is not None and change.text_document.version not in (None, open_doc.version):
            return False
        doc = TextDocument(uri, open_doc.source if open_doc else _path(uri).read_text(encoding="utf-8"))
        for edit in sorted(change.edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
            assert isinstance(edit, types.TextEdit)
            doc.apply_change(types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text))
        _path(uri).write_text(doc.source, encoding="utf-8")
        if open_doc is not None:
            self.change(uri, doc.source)
        return True

    def _register(self) -> None:
        """Handle what the server sends an editor (the methods in METHODS)."""

        def publish(params: types.PublishDiagnosticsParams) -> None:
            self.published.setdefault(params.uri, []).append(list(params.diagnostics))

        def status(params: Any) -> None:
            self.statuses.append(params if isinstance(params, dict) else params._asdict())

        def refresh(params: None) -> None:
            self.lens_refreshes += 1

        def register(params: types.RegistrationParams) -> None:
            self.registrations += params.registrations

        def apply(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
            return self.apply_edit(params)

        def configuration(params: types.ConfigurationParams) -> list[Any]:
            self.configuration_requests += 1
            return [self.client.get_configuration(section=item.section) for item in params.items]

        handlers = dict(zip(METHODS, (publish, status, refresh, register, apply, configuration), strict=True))
        for method, handler in handlers.items():
            self.client.feature(method)(handler)


def _path(uri: str) -> Path:
    from pygls.uris import to_fs_path

    path = to_fs_path(uri)
    assert path is not None
    return Path(path)
