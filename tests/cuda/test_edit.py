"""Edits of a text: what they move, and which ones change only whitespace and comments."""

from __future__ import annotations

import pytest

from cutune.cuda.edit import Edit, Overlaps, Shift
from cutune.cuda.parse import only_trivia, parse_source
from cutune.cuda.text import Position

SOURCE = """#define ROWS 4
// rows
__global__ void k(float* out, int n) {
  const int i = threadIdx.x;  // é
  if (i < n) out[i] = ROWS;
}

void launch(float* out, int n) {
  k<<<1, 256>>>(out, n);
}
"""


def _edit(old: str, new: str) -> tuple[Edit, bool]:
    edit = Edit.between(old.encode(), new.encode())
    removed = old.encode()[edit.start : edit.old_end]
    return edit, only_trivia(parse_source(new), removed, edit.start, edit.new_end)


def test_a_kernel_below_an_edit_is_where_a_new_parse_finds_it() -> None:
    edited = SOURCE.replace("// rows\n", "// rows\n// more\n/* and */ ")
    edit, _ = _edit(SOURCE, edited)
    assert edit.kernel(parse_source(SOURCE).kernel("k")) == parse_source(edited).kernel("k")


def test_a_span_holding_the_edit_ends_where_it_now_ends() -> None:
    edited = SOURCE.replace("const int i", "const  int i")
    edit, _ = _edit(SOURCE, edited)
    before, after = parse_source(SOURCE).kernel("k"), parse_source(edited).kernel("k")
    assert edit.span(before.span) == after.span and edit.span(before.name_span) == after.name_span
    with pytest.raises(Overlaps):  # a span that begins in the replaced text must be found again
        _edit(SOURCE, SOURCE.replace("__global__ void k", "void k"))[0].span(before.span)


def test_columns_move_on_the_line_where_the_edit_ends() -> None:
    edit, _ = _edit(SOURCE, SOURCE.replace("out[i] = ROWS", "out[i]  =  ROWS"))
    assert edit.position(Position(4, 22)) == Position(4, 24) and edit.position(Position(8, 2)) == Position(8, 2)
    assert edit.shift(Position(8, 0)) == Shift(2, 0) and edit.shift(Position(4, 0)) is None


@pytest.mark.parametrize(
    ("edited", "trivia"),
    [
        (SOURCE.replace("// rows\n", "// rows\n// more\n"), True),
        (SOURCE.replace("const int i", "const   int i"), True),
        (SOURCE.replace("// é", "// é and more"), True),  # typed in a comment
        (SOURCE.replace("(i < n)", "(i /* x */ < n)"), True),
        (SOURCE.replace("const int", "constint"), False),  # two tokens made one
        (SOURCE.replace("// rows\n", "// rows"), False),  # the comment now swallows the kernel's first line
        (SOURCE.replace("#define ROWS 4", "#define ROWS /* x */ 4"), False),  # in a directive
        (SOURCE.replace("256>>>", "128>>>"), False),
        (SOURCE.replace("// é", "// é */"), False),  # could end a comment
    ],
)
def test_only_whitespace_and_comments(edited: str, trivia: bool) -> None:
    assert _edit(SOURCE, edited)[1] is trivia
