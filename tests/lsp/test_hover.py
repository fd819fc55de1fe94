"""Hover on a tunable parameter: candidate values, the tuned value and its importance."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lsprotocol import types

from tests.lsp.editor import Editor
from tests.lsp.synthetic import REPLAYED

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _text(hover: types.Hover | None) -> str:
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    return hover.contents.value


async def test_a_struct_member_shows_candidates_tuned_value_and_importance(editor: Editor, tuned: Path) -> None:
    editor.use(tuned)
    uri = editor.open("scale.cu")
    hover = await editor.hover(uri, 5, 25)  # static constexpr int BLOCK_THREADS = 128;
    assert hover is not None and hover.range == types.Range(
        start=types.Position(line=5, character=23), end=types.Position(line=5, character=36)
    )
    text = _text(hover)
    assert re.match(
        r"\*\*BLOCK_THREADS\*\* — threads per block\n\ncandidates: 64, 128 \(original\), 256, 512\n\n"
        rf"tuned: \*\*256\*\* {REPLAYED}\n",
        text,
    )
    assert re.search(r"importance: \d+% of the time's variance$", text)


async def test_the_kernels_template_parameter_hovers_too(editor: Editor, tuned: Path) -> None:
    editor.use(tuned)
    uri = editor.open("scale.cu")
    text = _text(await editor.hover(uri, 11, 28))  # for (int item = 0; item < ITEMS_PER_THREAD; ...
    assert text.startswith(
        "**ITEMS_PER_THREAD** — consecutive block-chunks each thread handles\n\n"
        "candidates: 1 (original), 2, 4\n\ntuned: **2**"
    )


async def test_without_a_result_only_the_candidates_show(editor: Editor, recorded: Path) -> None:
    editor.use(recorded)
    uri = editor.open("scale.cu")
    assert _text(await editor.hover(uri, 5, 25)).endswith("candidates: 64, 128 (original), 256, 512")


async def test_other_words_have_no_hover(editor: Editor, tuned: Path) -> None:
    editor.use(tuned)
    uri = editor.open("scale.cu")
    assert await editor.hover(uri, 11, 12) is None  # `item`
    assert await editor.hover(uri, 0, 5) is None  # a comment outside every kernel


async def test_the_kernels_name_shows_the_per_size_picture(editor: Editor, tuned: Path) -> None:
    editor.use(tuned)
    uri = editor.open("scale.cu")
    text = _text(await editor.hover(uri, 10, 18))  # __global__ void scale_kernel(...
    assert re.match(rf"### scale_kernel {REPLAYED} \(sm_90\)", text)
    assert "| size | weight | original µs | tuned µs | speedup | % of floor | configuration |" in text
    rows = [line for line in text.splitlines() if line.startswith("| n=")]
    assert len(rows) == 2 and all(
        re.search(r"\| \d\.\d\d× \| \d+% \| BLOCK_THREADS=256, ITEMS_PER_THREAD=2 \|$", r) for r in rows
    )
    assert "single best configuration at every size (BLOCK_THREADS=256, ITEMS_PER_THREAD=2)" in text
