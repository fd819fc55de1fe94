"""Diagnostics: hints on tunable literals, results, and warnings the user must act on (spec, parse errors)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lsprotocol import types

from tests.lsp.editor import Editor, copy_workspace
from tests.lsp.synthetic import REPLAYED

Severity = types.DiagnosticSeverity

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _summary(diagnostics: list[types.Diagnostic]) -> list[tuple[int, Severity | None, str | int | None, str]]:
    return [(d.range.start.line, d.severity, d.code, d.message) for d in diagnostics]


async def test_hard_coded_literals_are_hints(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("diagnostics/plain", tmp_path))
    uri = editor.open("scale.cu")
    assert _summary(await editor.diagnostics(uri)) == [
        (16, Severity.Hint, "tunable-literal", "threads per block fixed at 128 — templatize to tune"),
        (9, Severity.Hint, "tunable-literal", "unroll factor fixed at 4 — templatize to tune"),
        (20, Severity.Hint, "tunable-literal", "grid size fixed at 1024 — templatize to tune"),
        (20, Severity.Hint, "tunable-literal", "threads per block fixed at 256 — templatize to tune"),
    ]


async def test_a_stored_result_is_information(editor: Editor, tuned: Path) -> None:
    editor.use(tuned)
    uri = editor.open("scale.cu")
    found = [d for d in await editor.diagnostics(uri) if d.code == "tuned"]
    assert len(found) == 1
    assert found[0].severity == Severity.Information
    assert found[0].range.start.line == 10  # the kernel's name
    assert re.match(
        rf"cutune: 1\.35× faster · 45% of speed-of-light · {REPLAYED} "
        r"with BLOCK_THREADS=256 \(was 128\), ITEMS_PER_THREAD=2 \(was 1\) — 12 configurations " + REPLAYED,
        found[0].message,
    )


async def test_a_templatized_kernel_without_spec_is_warned(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("diagnostics/spec_missing", tmp_path))
    uri = editor.open("scale.cu")
    warnings = [d for d in await editor.diagnostics(uri) if d.severity == Severity.Warning]
    assert _summary(warnings) == [
        (
            10,
            Severity.Warning,
            "spec-missing",
            "no tuning spec for scale_kernel in scale.tune.toml: draft one (quick fix), then "
            "check its sizes and argument shapes",
        )
    ]


async def test_an_invalid_spec_is_warned_at_its_line(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("diagnostics/spec_invalid", tmp_path))
    uri = editor.open("scale.cu")
    on_kernel = [d for d in await editor.diagnostics(uri) if d.code == "spec-invalid"]
    assert len(on_kernel) == 1 and on_kernel[0].severity == Severity.Warning
    assert "'flaot32' is not allowed; did you mean 'float32'?" in on_kernel[0].message
    related = on_kernel[0].related_information or []
    assert [(r.location.uri, r.location.range.start.line) for r in related] == [(editor.uri("scale.tune.toml"), 19)]
    in_spec = await editor.diagnostics(editor.uri("scale.tune.toml"))
    assert _summary(in_spec) == [
        (19, Severity.Warning, "spec-invalid", "'flaot32' is not allowed; did you mean 'float32'?")
    ]


async def test_a_spec_that_is_no_toml_is_warned_at_its_line(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("diagnostics/bad_toml", tmp_path))
    editor.open("scale.cu")
    in_spec = await editor.diagnostics(editor.uri("scale.tune.toml"))
    assert _summary(in_spec) == [(4, Severity.Warning, "spec-invalid", "not valid TOML: Illegal character '\\n'")]


async def test_fixing_the_spec_clears_its_warning(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("diagnostics/spec_invalid", tmp_path))
    uri = editor.open("scale.cu")
    spec_uri = editor.uri("scale.tune.toml")
    await editor.diagnostics(spec_uri)
    spec = editor.root / "scale.tune.toml"
    spec.write_text(spec.read_text().replace("flaot32", "float32"))
    seen = editor.publications(spec_uri)
    editor.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=spec_uri, type=types.FileChangeType.Changed)])
    )
    assert await editor.diagnostics(spec_uri, since=seen) == []
    assert not [d for d in await editor.diagnostics(uri) if d.severity == Severity.Warning]


async def test_a_malformed_file_gets_diagnostics_not_a_crash(editor: Editor, tmp_path: Path) -> None:
    editor.use(copy_workspace("diagnostics/malformed", tmp_path))
    uri = editor.open("broken.cu")
    found = await editor.diagnostics(uri)
    assert [(d.code, d.severity) for d in found] == [("parse-error", Severity.Information)]
    editor.change(uri, "\x00\x01 garbage ))) __global__ void (")
    await editor.diagnostics(uri, since=1)
    assert await editor.lenses(uri) == []
    hover = await editor.hover(uri, 0, 3)
    assert hover is None
