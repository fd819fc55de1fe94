"""Capture launches from the editor: the lens above the first kernel without a spec, and the command's refusals (no
GPU here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from lsprotocol import types

from tests.lsp.editor import Editor, copy_workspace

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _capture_lenses(lenses: list[types.CodeLens]) -> list[tuple[int, str]]:
    return [
        (x.range.start.line, x.command.title) for x in lenses if x.command and x.command.command == "cutune.capture"
    ]


async def test_the_first_kernel_without_a_spec_gets_the_capture_lens(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("autotune", tmp_path))  # its spec has scale_kernel only
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    lenses = await editor.lenses(uri)
    kernels = {
        x.range.start.line: x.command.arguments[0]["kernel"] for x in lenses if x.command and x.command.arguments
    }
    unspecified = sorted(line for line, k in kernels.items() if k != "scale_kernel")  # below scale_kernel
    assert _capture_lenses(lenses) == [(unspecified[0], "Capture launches…")]


async def test_capture_without_a_command_says_which_setting_to_set(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("lenses", tmp_path))
    uri = editor.open("scale.cu")
    reply = await editor.command("cutune.capture", uri, "scale_kernel")
    assert reply["specs"] == [] and "cutune.capture.command" in reply["refused"]
    assert editor.messages[-1].type == types.MessageType.Warning


@pytest.mark.skipif(Path("/dev/nvidia0").exists(), reason="this machine has a GPU")
async def test_capture_without_a_gpu_refuses_in_one_line(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("lenses", tmp_path))
    await editor.configure({"capture": {"command": f"{sys.executable} -c pass"}})
    uri = editor.open("scale.cu")
    reply = await editor.command("cutune.capture", uri, "scale_kernel")
    assert "capture needs a CUDA GPU and the program's own environment" in reply["refused"]
    assert "\n" not in editor.messages[-1].message
    await editor.configure({})
