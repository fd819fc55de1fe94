"""An edit's analysis made from the last one: the diagnostics and lenses of a whole analysis, only the edited
kernel looked at again."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from lsprotocol import types

from cutune.lsp.analysis import analyze
from cutune.lsp.diagnostics import document_diagnostics
from cutune.lsp.incremental import reanalyze
from cutune.lsp.results import ResultStore
from tests.lsp.editor import Editor

pytestmark = pytest.mark.asyncio(loop_scope="module")

KERNEL = """
template <typename T>
__global__ void scale_{i}_kernel(T* __restrict__ out, const T* __restrict__ in, int n) {{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * static_cast<T>({i});
}}

void launch_scale_{i}(float* out, const float* in, int n) {{
  scale_{i}_kernel<float><<<(n + 255) / 256, 256>>>(out, in, n);
}}
"""

SHARED = """
#define ROWS 4
__global__ void rows_kernel(float* out) {
#pragma unroll 2
  for (int r = 0; r < ROWS; ++r) out[r] = 0.f;
}
"""


def _summary(diagnostics: list[types.Diagnostic]) -> list[tuple[int, int, int, int, str | int | None, str]]:
    return sorted(
        (d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character, d.code, d.message)
        for d in diagnostics
    )


def _after(text: str, line: str, *inserted: str) -> str:
    """The text with lines inserted after the first line that is `line`."""
    lines = text.split("\n")
    at = lines.index(line) + 1
    return "\n".join(lines[:at] + list(inserted) + lines[at:])


async def _same_lenses(editor: Editor, uri: str, whole: str, what: str) -> None:
    """Wait until two documents show the same lenses (ranges and titles), or fail saying how they differ."""

    def shown(lenses: list[types.CodeLens]) -> list[tuple[types.Range, str]]:
        return [(lens.range, lens.command.title) for lens in lenses if lens.command]

    mine, theirs = [], []
    try:
        async with asyncio.timeout(30):
            while not mine or mine != theirs:
                mine, theirs = shown(await editor.lenses(uri)), shown(await editor.lenses(whole))
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"{what}: lenses differ: {mine} vs {theirs}") from None


HEAD = "__global__ void scale_20_kernel(T* __restrict__ out, const T* __restrict__ in, int n) {"
EDITS = [  # each made on the text the one before left
    lambda t: _after(
        t, "void launch_scale_19(float* out, const float* in, int n) {", "  // a comment in a host function"
    ),
    lambda t: _after(t, "}", "// a comment between two kernels"),  # whitespace and comments: moved
    lambda t: t.replace("// a comment between", "// another\n// a comment between"),  # differs in `nother\n// a`
    lambda t: _after(t, HEAD, "  const int vec = 16 / sizeof(T);"),  # one kernel's body: that kernel again
    lambda t: _after(t, HEAD, "  const int unused = vec + 1;"),
    lambda t: _after(t, HEAD, "  int r = ROWS;"),  # a name that decides a `#define`'s kernel: a whole analysis
    lambda t: t.replace("scale_3_kernel<float><<<(n + 255) / 256, 256>>>", "scale_3_kernel<float><<<1, 64>>>"),
    lambda t: t.replace("  const int i = blockIdx.x", "  const  int i = blockIdx.x", 1),  # spaces: moved
    lambda t: t.replace("__global__ void scale_7_kernel", "// gone\n__global__ void scale_7_kernel", 1),
    lambda t: t.replace("  const int unused = vec + 1;\n", ""),
]


async def test_an_edits_diagnostics_and_lenses_are_those_of_a_whole_analysis(editor: Editor, tmp_path: Path) -> None:
    editor.use(tmp_path)
    text = SHARED + "".join(KERNEL.format(i=i) for i in range(40))
    (tmp_path / "big.cu").write_text(text, encoding="utf-8")
    uri = editor.open("big.cu")
    await editor.diagnostics(uri)
    for n, edit in enumerate(EDITS):
        text = edit(text)
        published = editor.publications(uri)
        editor.change(uri, text)
        found = await editor.diagnostics(uri, since=published)
        whole = editor.open(f"whole_{n}.cu", text)  # the same text, analysed whole
        assert _summary(found) == _summary(await editor.diagnostics(whole)), f"edit {n}"
        # each document's lenses are made after its diagnostics, and a lens refresh may be another document's:
        # the two lists must come to agree (a list made from an older version would not)
        await _same_lenses(editor, uri, whole, f"edit {n}")
        editor.close(whole)
    editor.close(uri)


@pytest.mark.parametrize(
    ("edit", "again"),
    [(EDITS[0], False), (EDITS[1], False), (EDITS[2], False), (EDITS[3], True), (EDITS[5], None), (EDITS[6], None)],
)
async def test_which_edits_are_analysed_from_the_last_analysis(
    edit: Callable[[str], str], again: bool | None, tmp_path: Path
) -> None:
    """None: a whole analysis; else whether scale_20_kernel is parsed again (False: every kernel only moved)."""
    path = tmp_path / "big.cu"
    text = SHARED + "".join(KERNEL.format(i=i) for i in range(40))
    text = EDITS[1](text)
    previous = analyze(path.as_uri(), path, text, 1, ResultStore())
    made = reanalyze(previous, document_diagnostics(previous), edit(text), 2, lambda: False)
    assert (made is None) is (again is None)
    if made is not None:
        view = made[0].view("scale_20_kernel")
        assert view is not None and (view.found is not previous.kernels[21].found) is again


async def test_an_edit_in_one_kernel_looks_again_at_that_kernel_only(editor: Editor, tuned: Path) -> None:
    editor.use(tuned)
    results = tuned / ".cutune" / "results"
    hidden = tuned / "hidden"
    shutil.move(results, hidden)  # scale_kernel's result is not there when the file is opened
    uri = editor.open("scale.cu")
    assert not [d for d in await editor.diagnostics(uri) if d.code == "tuned"]
    shutil.move(hidden, results)  # back, without telling the server: only a whole analysis reads it
    text = editor.text(uri)
    published = editor.publications(uri)
    editor.change(uri, text.replace("    out[i] = x[i] + y[i];", "    out[i] = x[i] + y[i];\n    out[i] *= 2.f;"))
    found = await editor.diagnostics(uri, since=published)
    assert not [d for d in found if d.code == "tuned"], "add_kernel's edit looked at scale_kernel again"
    assert [(d.range.start.line, d.message) for d in found if d.code == "tunable-literal"] == [
        (18, "unroll factor fixed at 4 — templatize to tune"),
        (30, "grid size fixed at 1024 — templatize to tune"),
        (30, "threads per block fixed at 256 — templatize to tune"),
    ]
    published = editor.publications(uri)
    editor.client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    found = await editor.diagnostics(uri, since=published)
    assert [d.range.start.line for d in found if d.code == "tuned"] == [10], "a save analyses the file whole"
    editor.close(uri)


def _source_edits(actions: list[types.CodeAction], uri: str) -> list[tuple[str, int | None, list[object]]]:
    """Each action's title, and the version and edits of its changes to `uri`."""
    found = []
    for a in actions:
        assert a.edit is not None
        for c in a.edit.document_changes or []:
            if isinstance(c, types.TextDocumentEdit) and c.text_document.uri == uri:
                edits = [(e.range, e.new_text) for e in c.edits if isinstance(e, types.TextEdit)]
                found.append((a.title, c.text_document.version, edits))
    return found


async def test_a_kernels_code_actions_move_with_an_edit_elsewhere(editor: Editor, tmp_path: Path) -> None:
    editor.use(tmp_path)
    text = SHARED + "".join(KERNEL.format(i=i) for i in range(3))
    (tmp_path / "big.cu").write_text(text, encoding="utf-8")
    uri = editor.open("big.cu")
    await editor.diagnostics(uri)
    line = text.split("\n").index(HEAD.replace("20", "0"))
    before = await editor.actions(uri, line, only=["refactor.rewrite"])  # made for version 1
    assert before
    edited = _after(text, HEAD.replace("20", "2"), "  const int unused = 2;")  # in a kernel below
    published = editor.publications(uri)
    editor.change(uri, edited)
    await editor.diagnostics(uri, since=published)
    moved = await editor.actions(uri, line, only=["refactor.rewrite"], wait=False)  # at once: not made again
    assert [(title, version) for title, version, _ in _source_edits(moved, uri)] == [
        (title, 2) for title, _, _ in _source_edits(before, uri)
    ]
    fresh = editor.open("fresh.cu", edited)  # the same text: its offers made from it
    await editor.diagnostics(fresh)
    made = await editor.actions(fresh, line, only=["refactor.rewrite"])
    assert [edits for _, _, edits in _source_edits(moved, uri)] == [edits for _, _, edits in _source_edits(made, fresh)]
    editor.close(fresh)
    editor.close(uri)
