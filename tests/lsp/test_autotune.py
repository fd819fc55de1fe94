"""Autotune in the background: work-done progress, job status, one job per kernel, cancellation, refusals."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from lsprotocol import types

from tests.lsp.conftest import REPLAY
from tests.lsp.editor import ROOT, Editor
from tests.lsp.synthetic import REPLAYED

pytestmark = pytest.mark.asyncio(loop_scope="module")


SETTINGS = REPLAY


async def _open(editor: Editor, root: Path, settings: object = REPLAY) -> str:
    editor.use(root)
    await editor.configure(settings)
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    return uri


async def test_autotune_reports_progress_and_shows_the_result(editor: Editor, recorded: Path) -> None:
    uri = await _open(editor, recorded)
    reply = await editor.command("cutune.autotune", uri, "scale_kernel")
    token = reply["job"]
    running = (await editor.lenses(uri))[0].command  # the job takes longer than one request
    assert running is not None and (running.title, running.command) == ("⏳ autotuning… · Cancel", "cutune.cancel")
    await editor.wait(lambda: editor.finished("scale_kernel") is not None)
    status = editor.finished("scale_kernel")
    assert status is not None
    message = status.pop("message")
    assert re.fullmatch(rf"1\.35× faster · 45% of speed-of-light · {REPLAYED}", message)
    assert status == {
        "uri": uri,
        "kernel": "scale_kernel",
        "state": "done",
        "done": 12,
        "budget": 30,
        "best": 1.35,
    }
    assert [s["state"] for s in editor.statuses][:2] == ["queued", "running"]
    begin, *reports, end = editor.client.progress_reports[token]
    assert (
        isinstance(begin, types.WorkDoneProgressBegin) and begin.cancellable and begin.title == "Autotune scale_kernel"
    )
    assert reports and all(isinstance(r, types.WorkDoneProgressReport) for r in reports)
    assert reports[0].message == "preparing…"
    # the search counts trials; the phases after it say their name
    phase = r"(\d+/30 trials|(re-check|selection|sanitizer|held-out) · \d+ trials)"
    assert all(re.fullmatch(phase + r"( · best \d\.\d\d×)?", r.message or "") for r in reports[1:])
    assert isinstance(end, types.WorkDoneProgressEnd) and end.message == message
    await editor.wait(lambda: any(d.code == "tuned" for d in editor.published[uri][-1]))
    lens = (await editor.lenses(uri))[0].command
    assert lens is not None and lens.title.startswith("⚡ 1.35× faster") and lens.command == "cutune.apply"
    assert (recorded / ".cutune" / "results" / "scale.scale_kernel.json").is_file()


async def test_a_second_job_for_the_kernel_is_refused(editor: Editor, recorded: Path) -> None:
    uri = await _open(editor, recorded)
    first = await editor.command("cutune.autotune", uri, "scale_kernel")
    second = await editor.command("cutune.autotune", uri, "scale_kernel")
    assert first["job"] is not None
    assert second == {"job": None, "refused": "scale_kernel is already being tuned; cancel that job first"}
    assert editor.messages[-1].type == types.MessageType.Warning
    await editor.wait(lambda: editor.finished("scale_kernel") is not None)


async def test_cancel_from_the_progress_ui_stops_the_job(editor: Editor, recorded: Path) -> None:
    uri = await _open(editor, recorded)
    token = (await editor.command("cutune.autotune", uri, "scale_kernel"))["job"]
    editor.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    await editor.wait(lambda: editor.finished("scale_kernel") is not None)
    status = editor.finished("scale_kernel")
    assert status is not None and status["state"] == "cancelled" and status["done"] < 12
    assert isinstance(editor.client.progress_reports[token][-1], types.WorkDoneProgressEnd)
    assert not (recorded / ".cutune" / "results" / "scale.scale_kernel.json").exists()  # nothing unverified


async def test_the_cancel_command_stops_the_job(editor: Editor, recorded: Path) -> None:
    uri = await _open(editor, recorded)
    await editor.command("cutune.autotune", uri, "scale_kernel")
    assert await editor.command("cutune.cancel", uri, "scale_kernel") == {"cancelled": True}
    await editor.wait(lambda: editor.finished("scale_kernel") is not None)
    assert await editor.command("cutune.cancel", uri, "scale_kernel") == {"cancelled": False}


async def test_without_a_gpu_autotune_says_what_to_do(editor: Editor, recorded: Path) -> None:
    uri = await _open(editor, recorded, {"backend": "auto"})
    await editor.command("cutune.autotune", uri, "scale_kernel")
    await editor.wait(lambda: editor.finished("scale_kernel") is not None)
    assert editor.finished("scale_kernel")["state"] == "failed"  # type: ignore[index]
    await editor.wait(lambda: any("CUDA GPU" in m.message for m in editor.messages))
    assert editor.messages[-1].message == (
        "cutune: autotune of scale_kernel failed: measured tuning needs a CUDA GPU; "
        "run `cutune check` for compile-only results"
    )


async def test_a_missing_recording_or_spec_is_a_message(editor: Editor, recorded: Path) -> None:
    uri = await _open(editor, recorded, {**REPLAY, "replayFile": "nowhere.jsonl"})
    await editor.command("cutune.autotune", uri, "scale_kernel")
    await editor.command("cutune.autotune", uri, "add_kernel")
    await editor.wait(lambda: sum("failed" in m.message for m in editor.messages) == 2)
    failures = sorted(m.message for m in editor.messages if "failed" in m.message)
    assert failures[0].startswith("cutune: autotune of add_kernel failed: ")
    assert "no tuning spec for kernel 'add_kernel'" in failures[0]
    assert failures[1].startswith("cutune: autotune of scale_kernel failed: no recording at ")


async def test_a_real_h200_recording_replays_to_its_measured_speedup(editor: Editor, tmp_path: Path) -> None:
    recordings = sorted((ROOT / "benchmarks" / "results" / "recordings").glob("silu_and_mul.tune.*.jsonl"))
    if not recordings:
        pytest.skip("no recording of silu_and_mul on a GPU yet")
    root = tmp_path / "workspace"
    (root / ".cutune").mkdir(parents=True)
    shutil.copy(ROOT / "samples" / "silu_and_mul.cu", root)
    shutil.copy(ROOT / "tests" / "data" / "gpu" / "recorded_specs" / "silu_and_mul.tune.toml", root)  # as recorded
    shutil.copy(recordings[-1], root / "h200.jsonl")
    editor.use(root)
    await editor.configure({"backend": "replay", "replayFile": "h200.jsonl", "budget": {"trials": 60}})
    uri = editor.open("silu_and_mul.cu")
    await editor.diagnostics(uri)
    await editor.command("cutune.autotune", uri, "silu_and_mul_kernel")
    await editor.wait(lambda: editor.finished("silu_and_mul_kernel") is not None)
    status = editor.finished("silu_and_mul_kernel")
    assert status is not None and status["state"] == "done", status
    assert re.fullmatch(
        r"1\.\d\d× faster( \(per size\))? · \d\d% of speed-of-light · "
        r"replayed from h200\.jsonl \(NVIDIA H200, 2026-11-21\)",
        status["message"],
    )
    await editor.wait(lambda: any(d.code == "tuned" for d in editor.published[uri][-1]))
    applied = await editor.command("cutune.apply", uri, "silu_and_mul_kernel")
    assert applied == {"applied": True}, editor.messages[-1].message
    # the recording's per-size picks are within the noise of one configuration under the flags closest to the
    # original's (fast math alone), which the selection prefers: those flags, the original's block, and d compiled in
    # at each recorded size
    text = editor.text(uri)
    assert "static constexpr int BLOCK_THREADS = 1024;" in text
    assert (
        "if (d == 4096) {" in text
        and "serving::silu_and_mul_kernel<__half, 14336><<<grid, block, 0, stream>>>(" in text
    )
    assert editor.messages[-1].message == (
        "cutune: build silu_and_mul_kernel with --use_fast_math too: compile flags cannot be written into the source"
    )
