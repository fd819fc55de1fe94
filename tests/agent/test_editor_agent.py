"""The editor's Autotune runs the measured agent loop (`agent.autotune`) on replayed measurements, and the
results view's data holds per-size times against the floor, the trial history and the agent's steps.
A real `cutune serve` subprocess, driven through pytest-lsp, on a synthetic recording."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lsp.conftest import REPLAY, client, recorded, server  # noqa: F401 - the LSP fixtures
from tests.lsp.conftest import editor as editor
from tests.lsp.editor import Editor

pytestmark = pytest.mark.asyncio(loop_scope="module")

SETTINGS = {**REPLAY, "replayPace": 0.0, "agent": {"autotune": True, "maxIterations": 2, "stepTrials": 12}}


async def test_autotune_runs_the_agent_and_the_results_view_has_bars_trials_and_steps(
    editor: Editor,
    recorded: Path,  # noqa: F811
) -> None:
    editor.use(recorded)
    await editor.configure(SETTINGS)
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    reply = await editor.command("cutune.autotune", uri, "scale_kernel")
    assert reply["job"] is not None
    await editor.wait(lambda: editor.finished("scale_kernel") is not None)
    status = editor.finished("scale_kernel")
    assert status is not None and status["state"] == "done", status
    view = await editor.command("cutune.resultsView", uri, "scale_kernel")
    assert view["kernel"] == "scale_kernel" and view["replayed"].startswith("replayed from scale.recording.jsonl")
    assert view["sizes"] and all(s["floorUs"] and 0 < s["pctOfFloor"] <= 100 for s in view["sizes"])
    assert 0 < len(view["trials"]) <= 12 and all("objective" in t and "config" in t for t in view["trials"])
    # the kernel's guarded body is a grid-stride loop in canonical form, so built-in transforms propose variants;
    # the recording holds no measurement of them: each step is rejected saying so, until the budget is spent
    assert view["steps"] and all(
        s["outcome"] == "rejected" and "this recording does not match scale_kernel" in s["reason"]
        for s in view["steps"]
    )
    assert view["agent"]["stop"] == "budget"


async def test_the_results_view_of_a_kernel_never_tuned_says_so(editor: Editor, recorded: Path) -> None:  # noqa: F811
    editor.use(recorded)
    await editor.configure(SETTINGS)
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    view = await editor.command("cutune.resultsView", uri, "scale_kernel")
    assert view["sizes"] == [] and "autotune it first" in view["message"]
