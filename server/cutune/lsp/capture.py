"""Capture launches from the editor: run the program `cutune.capture.command` names under the launch recorder,
with cancellable work-done progress, then write the specs of the kernels it launched (Autotune works as usual)."""

from __future__ import annotations

import asyncio
import re
import shlex
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.uris import to_fs_path

from cutune.capture import CaptureError, SpecOutcome, capture, specs_from_log
from cutune.capture.run import CAPTURE_DIR
from cutune.project import workspace_dir
from cutune.spec import spec_path_for

if TYPE_CHECKING:
    from cutune.lsp.server import CutuneServer

NO_COMMAND = (
    "set `cutune.capture.command` to a command that runs your kernels the way your application does (a test, a "
    "benchmark, a model step), e.g. `python bench.py`"
)
_TABLE = re.compile(r'^\s*\[kernel\."?([^\]".]+)"?\]\s*$', re.MULTILINE)


def specified_kernels(source: Path) -> frozenset[str]:
    """The kernels the spec file beside `source` has a table for (read cheaply: lenses ask often)."""
    try:
        return frozenset(_TABLE.findall(spec_path_for(source).read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError):
        return frozenset()


async def capture_launches(ls: CutuneServer, uri: str) -> SpecOutcome:
    """Run the capture command in the workspace of `uri` and write the specs; raises CutuneError (CaptureError,
    NoGpuError) when it cannot run. The program runs in the workspace folder; its output goes to
    `.cutune/capture/program.log`."""
    settings = ls.session.settings.capture
    command = shlex.split(settings.command)
    fs_path = to_fs_path(uri)
    if not command or fs_path is None:
        raise CaptureError(NO_COMMAND)
    root = workspace_dir(Path(fs_path))
    cancel = threading.Event()
    token = await _begin(ls, " ".join(command), cancel)
    message = "stopped"
    try:
        run = await asyncio.to_thread(
            capture,
            command,
            root,
            data=settings.data,
            cancel=cancel,
            output=root / CAPTURE_DIR / "program.log",
            cwd=root,
        )
        outcome = await asyncio.to_thread(specs_from_log, run.log, root)
        message = f"{len(outcome.kernels)} spec(s) written from {sum(k.launches for k in outcome.kernels)} launches"
        return outcome
    finally:
        if token is not None:
            ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))


async def _begin(ls: CutuneServer, command: str, cancel: threading.Event) -> str | None:
    """A cancellable work-done progress for the capture, where the client shows progress; its token."""
    window = ls.client_capabilities.window
    if window is None or not window.work_done_progress:
        return None
    token = f"cutune-capture-{uuid.uuid4().hex[:8]}"
    try:
        await ls.work_done_progress.create_async(token)
    except Exception:  # no progress UI: the capture runs all the same
        return None
    ls.work_done_progress.tokens[token].add_done_callback(lambda _: cancel.set())  # cancelled from the editor
    begin = types.WorkDoneProgressBegin(title="Capture launches", cancellable=True, message=command)
    ls.work_done_progress.begin(token, begin)
    return token
