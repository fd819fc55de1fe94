"""Code lenses: Templatize and Autotune above each kernel, Capture launches above the first without a spec; a stored
result with Apply."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lsprotocol import types

from cutune.lsp.lenses import INDEX_BITS, KERNEL_BITS, WINDOWED_FROM, lens_key, lens_place, shown_lines, windowed
from cutune.lsp.session import Session
from tests.lsp.editor import Editor, copy_workspace
from tests.lsp.synthetic import REPLAYED

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _titles(lenses: list[types.CodeLens]) -> list[tuple[int, str, str]]:
    return [(lens.range.start.line, lens.command.title, lens.command.command) for lens in lenses if lens.command]


async def test_every_kernel_gets_templatize_and_autotune(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("lenses", tmp_path))
    uri = editor.open("scale.cu")
    first = _titles(await editor.lenses(uri))  # right after didOpen: from the quick scan or the analysis
    await editor.diagnostics(uri)
    expected = [
        (3, "Templatize", "cutune.templatize"),
        (3, "Autotune", "cutune.autotune"),
        (3, "Capture launches…", "cutune.capture"),  # no spec yet: above the first kernel, for every kernel
        (8, "Templatize", "cutune.templatize"),
        (8, "Autotune", "cutune.autotune"),
    ]
    assert first == expected
    lenses = await editor.lenses(uri)
    assert _titles(lenses) == expected
    assert lenses[0].command is not None
    assert list(lenses[0].command.arguments or []) == [{"uri": uri, "kernel": "scale_kernel"}]


async def test_a_stored_result_reads_as_a_speedup_with_apply(editor: Editor, tuned: Path) -> None:
    editor.use(tuned)
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    titles = _titles(await editor.lenses(uri))
    line, title, command = titles[0]
    assert line == 9 and command == "cutune.apply"
    assert re.fullmatch(rf"⚡ 1\.35× faster · 45% of speed-of-light · {REPLAYED} · Apply", title)
    assert (9, "Autotune", "cutune.autotune") in titles
    assert not any(t == "Templatize" for line, t, _ in titles if line == 9)  # already templatized


async def test_lenses_come_without_commands_and_resolve_to_them(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("lenses", tmp_path))
    uri = editor.open("scale.cu")
    await editor.diagnostics(uri)
    bare = await editor.lenses(uri, resolve=False)
    assert [lens.command for lens in bare] == [None] * 5  # the editor resolves only those it shows
    third = await editor.client.code_lens_resolve_async(bare[2])
    assert third.command is not None
    assert (third.command.title, third.command.command) == ("Capture launches…", "cutune.capture")
    assert list(third.command.arguments or []) == [{"uri": uri, "kernel": "scale_kernel"}]
    assert bare[2].data == [bare[2].data[0], "scale_kernel"]  # lsp/lenses.py `lens_key`, and the name the palette reads
    published = editor.publications(uri)
    editor.change(uri, editor.text(uri).replace("scale_kernel", "renamed_kernel"))
    await editor.diagnostics(uri, since=published)
    gone = await editor.client.code_lens_resolve_async(bare[2])  # asked before the edit: its kernel is gone
    assert gone.command is not None and gone.command.command == ""
    editor.close(uri)


async def test_lenses_follow_incremental_edits_of_a_crlf_document(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("lenses", tmp_path))
    refreshed = editor.lens_refreshes
    uri = editor.open("scale.cu", (tmp_path / "workspace" / "scale.cu").read_text().replace("\n", "\r\n"))
    await editor.diagnostics(uri)
    # the opened version's lenses are made after its diagnostics: their refresh must not pass for the edit's below
    await editor.wait(lambda: editor.lens_refreshes > refreshed)
    published = editor.publications(uri)
    top = types.Range(start=types.Position(line=1, character=0), end=types.Position(line=1, character=0))
    refreshed = editor.lens_refreshes
    editor.edit(uri, top, "// é😋\r\n// two\r\n")
    # asked at once, during the edit's analysis: the last analysis's lenses, as they were
    assert sorted({line for line, _, _ in _titles(await editor.lenses(uri))}) == [3, 8]
    # the new lenses are made after the diagnostics are published, and the server asks the editor to refresh
    await editor.diagnostics(uri, since=published)
    await editor.wait(lambda: editor.lens_refreshes > refreshed)
    published, refreshed = editor.publications(uri), editor.lens_refreshes
    assert sorted({line for line, _, _ in _titles(await editor.lenses(uri))}) == [5, 10]
    after_emoji = types.Position(line=1, character=6)  # the end of line 1 (😋 is two UTF-16 units)
    editor.edit(uri, types.Range(start=after_emoji, end=types.Position(line=3, character=0)), "\n")
    await editor.diagnostics(uri, since=published)
    await editor.wait(lambda: editor.lens_refreshes > refreshed)
    assert sorted({line for line, _, _ in _titles(await editor.lenses(uri))}) == [4, 9]
    editor.close(uri)


async def test_a_lens_key_holds_its_list_kernel_and_index_exactly_in_a_json_number() -> None:
    last = (1 << 29) - 1, (1 << KERNEL_BITS) - 1, (1 << INDEX_BITS) - 1  # the largest of each
    assert lens_key(*last) < 1 << 53  # an editor's JSON numbers are doubles
    assert [lens_place(lens_key(*p)) for p in (last, (0, 0, 0), (3, 5, 2))] == [last, (0, 0, 0), (3, 5, 2)]


def _many_kernels(count: int) -> str:
    """`count` small kernels, one every 10 lines (kernel i's definition on line 10 i, its unroll hint on the next)."""
    kernel = (
        "__global__ void k_{i}(float* x) {{\n#pragma unroll 4\n"
        "  for (int j = threadIdx.x; j < 64; j += blockDim.x) x[j] = {i}.0f;\n}}\n" + "//\n" * 6
    )
    return "".join(kernel.format(i=i) for i in range(count))


async def test_a_document_of_many_kernels_gets_lenses_and_hints_near_the_lines_the_editor_shows(
    editor: Editor, tmp_path: Path
) -> None:
    editor.use(copy_workspace("lenses", tmp_path))
    count = WINDOWED_FROM + 100
    uri = editor.open("many.cu", _many_kernels(count))

    def kernels(found: list[types.CodeLens] | list[types.Diagnostic]) -> set[int]:
        return {item.range.start.line // 10 for item in found}

    assert kernels(await editor.diagnostics(uri)) == set(range(count))  # not told what it shows: every hint
    assert kernels(await editor.lenses(uri, resolve=False)) == set(range(count))  # and every lens
    refreshed, published, margin = editor.lens_refreshes, editor.publications(uri), Session.WINDOW_MARGIN
    editor.show(uri, 3000, 3040)
    await editor.wait(lambda: editor.lens_refreshes > refreshed)  # the editor asks again, and gets the window's
    window = set(range((3000 - margin) // 10, (3040 + margin) // 10 + 1))
    assert kernels(await editor.lenses(uri, resolve=False)) == window
    hints = await editor.diagnostics(uri, since=published)  # published again, with the window's hints only
    assert {d.code for d in hints} == {"tunable-literal"}
    assert kernels(hints) == {i for i in window if 10 * i + 1 <= 3040 + margin}  # a hint is a line below its kernel
    refreshed = editor.lens_refreshes
    editor.show(uri, 100, 140)  # scrolled out of the window: new lenses
    await editor.wait(lambda: editor.lens_refreshes > refreshed)
    near = await editor.lenses(uri, resolve=False)
    assert kernels(near) == set(range(0, (140 + margin) // 10 + 1))
    resolved = await editor.client.code_lens_resolve_async(near[-1])  # a windowed lens resolves to its kernel
    assert resolved.command is not None and list(resolved.command.arguments or []) == [{"uri": uri, "kernel": "k_214"}]
    editor.show(uri, 120, 160)  # within the window: nothing new
    assert kernels(await editor.lenses(uri, resolve=False)) == kernels(near)
    editor.close(uri)


async def test_lines_shown_as_the_document_opens_window_its_first_lenses_and_hints(
    editor: Editor, tmp_path: Path
) -> None:
    editor.use(copy_workspace("lenses", tmp_path))
    count, margin = WINDOWED_FROM + 100, Session.WINDOW_MARGIN
    uri = editor.open("many.cu", _many_kernels(count))
    editor.show(uri, 5900, 5940)  # as an editor says right after opening, before the analysis
    window = set(range((5900 - margin) // 10, count))
    assert {d.range.start.line // 10 for d in await editor.diagnostics(uri)} == window  # the first publication
    assert {lens.range.start.line // 10 for lens in await editor.lenses(uri, resolve=False)} == window
    editor.close(uri)


async def test_a_document_of_few_kernels_keeps_every_lens_whatever_the_editor_shows(
    editor: Editor, tmp_path: Path
) -> None:
    editor.use(copy_workspace("lenses", tmp_path))
    uri = editor.open("scale.cu")
    editor.show(uri, 6000, 6040)  # far below its two kernels
    await editor.diagnostics(uri)
    assert sorted({lens.range.start.line for lens in await editor.lenses(uri, resolve=False)}) == [3, 8]
    editor.close(uri)


async def test_shown_lines_are_read_from_dicts_or_objects_and_bad_ones_left_out() -> None:
    shown = {"start": {"line": 4, "character": 0}, "end": {"line": 9, "character": 0}}
    backwards = {"start": {"line": 9}, "end": {"line": 4}}
    params = {"textDocument": {"uri": "file:///a.cu"}, "ranges": [shown, backwards, {"start": {"line": "x"}}]}
    assert shown_lines(params) == ("file:///a.cu", [(4, 9)])
    assert shown_lines({"ranges": [shown]}) == (None, [])
    assert shown_lines(None) == (None, [])
    assert windowed(WINDOWED_FROM, (10, 20)) is None and windowed(WINDOWED_FROM + 1, (10, 20)) == (10, 20)
