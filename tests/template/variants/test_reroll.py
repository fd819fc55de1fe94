"""reroll: runs of hand-unrolled element stores read as the loops they unroll, and the runs it leaves as written."""

from __future__ import annotations

import pytest

from cutune.cuda.parse import parse_source
from cutune.template.variants.loops import kernel_source
from cutune.template.variants.reroll import rerolled

KERNEL = """
__global__ void k(float* y, const float* q, int n) {{
  float s = 2.f;
  {body}
}}
"""


def _rolled(body: str) -> str | None:
    text = rerolled(kernel_source("t", parse_source(KERNEL.format(body=body)), "k"))
    return " ".join(text.split()) if text is not None else None


def test_a_pair_and_a_run_of_four_from_an_offset_become_loops() -> None:
    flat = _rolled(
        "y[0] = q[0] * s; y[1] = q[1] * s; s += 1.f; y[32] = q[4]; y[33] = q[5]; y[34] = q[6]; y[35] = q[7];"
    )
    assert flat is not None
    assert (
        "for (int cutune_rr0 = 0; cutune_rr0 < 2; ++cutune_rr0) { y[cutune_rr0] = q[cutune_rr0] * s; } s += 1.f;"
        in flat
    )
    assert "for (int cutune_rr1 = 0; cutune_rr1 < 4; ++cutune_rr1) { y[cutune_rr1 + 32] = q[cutune_rr1 + 4]; }" in flat


def test_a_run_is_cut_to_the_longest_count_and_the_rest_tried_again() -> None:
    # five stores: a loop of four, then a last one alone (no run of one)
    flat = _rolled("y[0] = q[0]; y[1] = q[1]; y[2] = q[2]; y[3] = q[3]; y[4] = q[4];")
    assert flat is not None and "cutune_rr0 < 4" in flat and "} y[4] = q[4];" in flat and "cutune_rr1" not in flat


@pytest.mark.parametrize(
    "body",
    [
        "y[0] = q[0]; y[1] = q[2];",  # the literals count by two
        "y[0] = q[n]; y[1] = q[n + 1];",  # a literal inside a larger index
        "y[0] = 0.f; y[1] = 1.f;",  # a literal that is not an index
        "y[0] = q[0]; y[1] = q[1] + s;",  # not the same statement
        "y[0] = q[0]; s = q[1];",  # not both stores to a subscript
        "y[0x0] = q[0]; y[0x1] = q[1];",  # not decimal
    ],
)
def test_runs_that_are_not_one_store_unrolled_stay_as_written(body: str) -> None:
    assert _rolled(body) is None
