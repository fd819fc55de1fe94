"""unified_diff: what `diff -u` shows, computed over the changed region only."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from cutune.cuda import parse_source
from cutune.template.diff import unified_diff
from cutune.template.templatize import templatize

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _whole(before: str, after: str) -> str:
    return "".join(
        difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), "a/f.cu", "b/f.cu")
    )


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.cu")), ids=lambda p: p.name)
def test_a_templatized_sample_diffs_as_difflib_does(path: Path) -> None:
    model = parse_source(path.read_text(encoding="utf-8"), str(path))
    for kernel in model.kernels:
        after = templatize(model, kernel.name).source
        assert unified_diff(model.text, after, "f.cu") == _whole(model.text, after)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("a\nb\nc\n", "a\nb\nc\n"),  # no change: no diff
        ("", "x\n"),  # from nothing
        ("x\n", ""),  # to nothing
        ("a\nb\n", "a\nb\nc"),  # an added last line without a newline
        ("".join(f"{i}\n" for i in range(40)), "".join(f"{i}\n" for i in range(40) if i != 20)),  # one deletion
        ("".join(f"{i}\n" for i in range(40)), "".join(f"{i}\n" if i % 13 else f"{i}!\n" for i in range(40))),
    ],
)
def test_edge_cases_diff_as_difflib_does(before: str, after: str) -> None:
    assert unified_diff(before, after, "f.cu") == _whole(before, after)


def test_hunks_of_a_long_file_are_numbered_in_the_whole_file() -> None:
    before = "".join(f"line {i}\n" for i in range(1, 5001))
    after = before.replace("line 2500\n", "line 2500 changed\n").replace("line 4000\n", "")
    diff = unified_diff(before, after, "f.cu")
    assert diff == _whole(before, after)
    assert "@@ -2497,7 +2497,7 @@" in diff and "@@ -3997,7 +3997,6 @@" in diff
