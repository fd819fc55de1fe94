"""The language server under test: a real `cutune serve` subprocess per test module, driven by an Editor.

A module's `SETTINGS` (if any) are the initialization options of its server; each test works in a fresh
copy of its fixture workspace (`editor.use(...)`), so tests share a server but no files.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import pytest_lsp
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from cutune.gpu.registry import create_backend
from cutune.project import build_job, open_kernel, tune_options
from cutune.tune import tune
from tests.lsp.editor import METHODS, Editor, copy_workspace
from tests.lsp.synthetic import write_recording

# paced so that a job outlasts the requests a test makes while it runs
REPLAY = {
    "backend": "replay",
    "replayFile": "scale.recording.jsonl",
    "replayPace": 0.05,
    "budget": {"trials": 30, "seconds": 60},
}


def make_client() -> LanguageClient:
    """A pytest-lsp client whose handlers for METHODS are left to the Editor."""
    client = LanguageClient(converter_factory=default_converter)
    register_lsp_features(client, {m: f for m, f in DEFAULT_CLIENT_FEATURES.items() if m not in METHODS})
    return client


SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "cutune", "serve"], client_factory=make_client)


@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: LanguageClient) -> AsyncIterator[LanguageClient]:
    """A client connected to the module's server."""
    yield lsp_client
    await lsp_client.shutdown_session()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(client: LanguageClient, request: pytest.FixtureRequest) -> Editor:
    """The module's server, initialized with the module's SETTINGS."""
    editor = Editor(client)
    await editor.start(getattr(request.module, "SETTINGS", None))
    return editor


@pytest.fixture
def editor(server: Editor) -> Editor:
    """The module's editor, with its per-test state reset (call `use` to give it a workspace)."""
    return server.use(Path())


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """The autotune workspace with a synthetic recording of every configuration of `scale_kernel`."""
    root = copy_workspace("autotune", tmp_path)
    write_recording(root / "scale.cu", "scale_kernel", root / REPLAY["replayFile"])
    return root


@pytest.fixture
def tuned(recorded: Path) -> Path:
    """The recorded workspace with `scale_kernel` tuned in-process (its result stored in `.cutune/`)."""
    ctx = open_kernel(recorded / "scale.cu", "scale_kernel")
    backend = create_backend("replay", path=recorded / REPLAY["replayFile"])
    tune(build_job(ctx), backend, tune_options(ctx, trials=20, seconds=60))
    return recorded
