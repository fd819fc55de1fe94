"""loop_temps: a local a loop only uses as its own temporary declared in that loop, and the reasons it stays."""

from __future__ import annotations

import pytest

from cutune.cuda.parse import parse_source
from cutune.template.variants.canonical.loop_temps import loop_temporaries

# FasterTransformer's LayerNorm shape: `val` sums the row, then is the last loop's temporary
REUSED = """
__global__ void k(float* x, int n) {
  float val = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    val += x[i];
  }
  x[n] = val;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    val = x[i] - 1.0f;
    x[i] = val * val;
  }
}
"""


def test_the_last_loop_gets_its_own_temporary() -> None:
    result = loop_temporaries(parse_source(REUSED), "k")
    assert result is not None
    assert "    float val = x[i] - 1.0f;" in result.text
    assert result.text.count("float val") == 2 and "val += x[i];" in result.text


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("    x[i] = val * val;\n  }\n", "    x[i] = val * val;\n  }\n  x[0] = val;\n"),  # read after the loop
        ("val = x[i] - 1.0f;", "val = val + x[i];"),  # the first assignment reads it: carried
        ("x[n] = val;", "float* p = &val;"),  # an alias would still see the outer local
        ("float val = 0.0f;", "static float val = 0.0f;"),  # one object for every call of the kernel
        ("i < n; i += blockDim.x) {\n    val =", "i < n && val < 9.0f; i += blockDim.x) {\n    val ="),  # header
    ],
)
def test_a_local_the_loop_does_not_own_stays(old: str, new: str) -> None:
    source = REUSED.replace(old, new)
    assert source != REUSED
    result = loop_temporaries(parse_source(source), "k")
    assert result is None or "float val = x[i]" not in result.text


def test_a_loop_inside_another_loop_keeps_the_local() -> None:
    nested = REUSED.replace(
        "  for (int i = threadIdx.x; i < n; i += blockDim.x) {\n    val = x[i] - 1.0f;",
        "  for (int r = 0; r < 2; ++r)\n  for (int i = threadIdx.x; i < n; i += blockDim.x) {\n    val = x[i] - 1.0f;",
    )
    assert loop_temporaries(parse_source(nested), "k") is None


def test_a_local_a_later_statement_sets_first_is_the_loops_too() -> None:
    # FasterTransformer's int8 LayerNorm: `float output_f;` between the loops, set by the last loop's second statement
    later = REUSED.replace("x[n] = val;", "x[n] = val;\n  float out;").replace(
        "    x[i] = val * val;", "    out = val * val;\n    x[i] = out;"
    )
    result = loop_temporaries(parse_source(later), "k")
    assert result is not None
    assert "    float val = x[i] - 1.0f;\n    float out = val * val;" in result.text
    # named before the statement that sets it (read in the first statement): carried from the iteration before
    carried = later.replace("    val = x[i] - 1.0f;", "    val = x[i] - out;")
    result = loop_temporaries(parse_source(carried), "k")
    assert result is None or "float out = val * val;" not in result.text
