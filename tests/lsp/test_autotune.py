"""Autotune in the background: work-done progress, job status, one job per kernel, cancellation, refusals."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.lsp.conftest import REPLAY
from tests.lsp.editor import Editor


async def _start(client: LanguageClient, root: Path, settings: object = REPLAY) -> tuple[Editor, str]:
    editor = Editor(client, root)
    await editor.start(settings)
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    return editor, uri


async def test_autotune_reports_progress_and_shows_the_result(client: LanguageClient, recorded: Path) -> None:
    editor, uri = await _start(client, recorded)
    reply = await editor.command("cutune.autotune", uri, "scale_kernel")
    token = reply["job"]
    await editor.wait(lambda: editor.finished("scale_kernel") is not None)
    status = editor.finished("scale_kernel")
    assert status == {"uri": uri, "kernel": "scale_kernel", "state": "done", "done": 12, "budget": 30,
                      "best": 1.35, "message": "1.35× faster · 45% of speed-of-light · Synthetic GPU (test-only)"}
    assert [s["state"] for s in editor.statuses][:2] == ["queued", "running"]
    begin, *reports, end = client.progress_reports[token]
    assert isinstance(begin, types.WorkDoneProgressBegin) and begin.cancellable and begin.title == "Autotune scale_kernel"
    assert reports and all(isinstance(r, types.WorkDoneProgressReport) for r in reports)
    assert reports[0].message == "preparing…" and reports[-1].message.startswith(("1", "2", "3", "4", "5", "6"))
    assert isinstance(end, types.WorkDoneProgressEnd) and end.message == status["message"]
    await editor.wait(lambda: any(d.code == "tuned" for d in editor.published[uri][-1]))
    lens = (await editor.lenses(uri))[0].command
    assert lens is not None and lens.title.startswith("⚡ 1.35× faster") and lens.command == "cutune.apply"
    assert (recorded / ".cutune" / "results" / "scale.scale_kernel.json").is_file()


async def test_a_second_job_for_the_kernel_is_refused(client: LanguageClient, recorded: Path) -> None:
    editor, uri = await _start(client, recorded)
    first = await editor.command("cutune.autotune", uri, "scale_kernel")
    second = await editor.command("cutune.autotune", uri, "scale_kernel")
    assert first["job"] is not None
    assert second == {"job": None, "refused": "scale_kernel is already being tuned; cancel that job first"}
    assert client.messages[-1].type == types.MessageType.Warning
    await editor.wait(lambda: editor.finished("scale_kernel") is not None)


async def test_cancel_from_the_progress_ui_stops_the_job(client: LanguageClient, recorded: Path) -> None:
    editor, uri = await _start(client, recorded)
    token = (await editor.command("cutune.autotune", uri, "scale_kernel"))["job"]
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    await editor.wait(lambda: editor.finished("scale_kernel") is not None)
    status = editor.finished("scale_kernel")
    assert status is not None and status["state"] == "cancelled" and status["done"] < 12
    assert isinstance(client.progress_reports[token][-1], types.WorkDoneProgressEnd)
    assert not (recorded / ".cutune" / "results" / "scale.scale_kernel.json").exists()  # nothing unverified


async def test_the_cancel_command_stops_the_job(client: LanguageClient, recorded: Path) -> None:
    editor, uri = await _start(client, recorded)
    await editor.command("cutune.autotune", uri, "scale_kernel")
    assert await editor.command("cutune.cancel", uri, "scale_kernel") == {"cancelled": True}
    await editor.wait(lambda: editor.finished("scale_kernel") is not None)
    assert await editor.command("cutune.cancel", uri, "scale_kernel") == {"cancelled": False}


async def test_without_a_gpu_autotune_says_what_to_do(client: LanguageClient, recorded: Path) -> None:
    editor, uri = await _start(client, recorded, {"backend": "auto"})
    await editor.command("cutune.autotune", uri, "scale_kernel")
    await editor.wait(lambda: editor.finished("scale_kernel") is not None)
    assert editor.finished("scale_kernel")["state"] == "failed"  # type: ignore[index]
    await editor.wait(lambda: any("CUDA GPU" in m.message for m in client.messages))
    assert client.messages[-1].message == ("cutune: autotune of scale_kernel failed: measured tuning needs a CUDA GPU; "
                                           "run `cutune check` for compile-only results")


async def test_a_missing_recording_or_spec_is_a_message(client: LanguageClient, recorded: Path) -> None:
    editor, uri = await _start(client, recorded, {**REPLAY, "replayFile": "nowhere.jsonl"})
    await editor.command("cutune.autotune", uri, "scale_kernel")
    await editor.command("cutune.autotune", uri, "add_kernel")
    await editor.wait(lambda: editor.finished("scale_kernel") is not None and editor.finished("add_kernel") is not None)
    failures = sorted(m.message for m in client.messages if "failed" in m.message)
    assert failures[0].startswith("cutune: autotune of add_kernel failed: ")
    assert "no tuning spec for kernel 'add_kernel'" in failures[0]
    assert failures[1].startswith("cutune: autotune of scale_kernel failed: no recording at ")
