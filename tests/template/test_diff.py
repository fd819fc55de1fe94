"""unified_diff: what `diff -u` shows, computed over the changed region only."""

from __future__ import annotations

import difflib
import re
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


def _patched(before: str, diff: str) -> str:
    """`before` with a unified diff's hunks applied (as `patch` does), checking every context and removed line."""
    lines, out, at = before.splitlines(keepends=True), [], 0
    for hunk in re.split(r"^(?=@@ )", diff, flags=re.M)[1:]:
        header, *body = hunk.splitlines(keepends=True)
        start = int(re.match(r"@@ -(\d+)", header).group(1)) - 1  # type: ignore[union-attr]
        start = max(start, 0) if ",0 " not in header.split("+")[0] else start + 1
        out += lines[at:start]
        at = start
        for line in body:
            if line.startswith((" ", "-")):
                assert lines[at] == line[1:], f"line {at + 1} is not what the hunk says"
                at += 1
            if line.startswith((" ", "+")):
                out.append(line[1:])
    return "".join(out + lines[at:])


def _changed(diff: str) -> tuple[int, int]:
    body = [line for line in diff.splitlines() if not line.startswith(("---", "+++", "@@"))]
    return sum(line.startswith("+") for line in body), sum(line.startswith("-") for line in body)


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.cu")), ids=lambda p: p.name)
def test_a_templatized_sample_diffs_as_diff_u_does(path: Path) -> None:
    """Applied, the diff gives the templatized text, with as few changed lines as difflib's; where an added block
    borders a line equal to its own last one (a blank line), either side may hold that line, as in `diff -u`."""
    model = parse_source(path.read_text(encoding="utf-8"), str(path))
    for kernel in model.kernels:
        after = templatize(model, kernel.name).source
        diff = unified_diff(model.text, after, "f.cu")
        assert _patched(model.text, diff) == after
        assert _changed(diff) == _changed(_whole(model.text, after))


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
