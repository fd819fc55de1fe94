"""loop_exits: an exit at a bound a loop's index only moves towards, read as the bounds check it is."""

from __future__ import annotations

import pytest

from cutune.cuda.parse import parse_source
from cutune.template.variants.canonical import canonicalise
from cutune.template.variants.canonical.exits import exits_to_checks

# a row held in registers by rounds of the block (exllamav2's RMSNorm): the first loop leaves at the row's end, the
# last returns there
ROUNDS = """
#define THREADS 1024
template <int ROUNDS>
__global__ void k(const float* __restrict__ x, float* __restrict__ y, const int dim) {
  const float* row = x + blockIdx.x * dim;
  float cache[ROUNDS];
  float sum = 0.0f;
  for (int r = 0; r < ROUNDS; r++) {
    const int c = threadIdx.x + THREADS * r;
    if (c >= dim) break;
    cache[r] = row[c];
    sum += cache[r];
  }
  sum = __shfl_xor_sync(0xffffffffu, sum, 1);
  for (int r = 0; r < ROUNDS; r++) {
    int c = r * THREADS + threadIdx.x;
    if (dim <= c) { return; }
    y[blockIdx.x * dim + c] = cache[r] * sum;
  }
}
"""


def _body(source: str) -> str:
    result = exits_to_checks(parse_source(source), "k")
    assert result is not None and not isinstance(result, str), result
    k = result.kernel("k")
    return "".join(result.text[k.body_span.start_byte : k.body_span.end_byte].split())


def test_an_exit_at_a_bound_the_index_moves_towards_is_a_bounds_check() -> None:
    body = _body(ROUNDS)
    assert "constintc=threadIdx.x+THREADS*r;if(c<dim){cache[r]=row[c];sum+=cache[r];}}" in body
    assert "intc=r*THREADS+threadIdx.x;if(c<dim){y[blockIdx.x*dim+c]=cache[r]*sum;}}" in body
    assert "break" not in body and "return" not in body
    assert "loop_exits" in canonicalise(parse_source(ROUNDS), "k").applied


def test_an_exit_and_a_condition_the_loop_does_not_change() -> None:
    source = ROUNDS.replace("if (c >= dim) break;", "if (TAIL && c >= dim) break;").replace(
        "template <int ROUNDS>", "template <int ROUNDS, bool TAIL>"
    )
    assert "if(!(TAIL)||c<dim){cache[r]=row[c];" in _body(source)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            ("const int c = threadIdx.x + THREADS * r;", "const int c = threadIdx.x + THREADS * r + (int)row[0];"),
            "does more than declare arithmetic before its exit",
        ),
        (
            ("r < ROUNDS; r++) {\n    const int c", "r < ROUNDS; r--) {\n    const int c"),
            "its index is not one that only grows",
        ),
        (("if (c >= dim) break;", "if (c >= dim - r) break;"), "not at a bound its index only moves towards"),
        (("if (c >= dim) break;", "if (c < dim) break;"), "not at a bound its index only moves towards"),
        (
            ("const int c = threadIdx.x + THREADS * r;", "const int c = threadIdx.x - THREADS * r;"),
            "not at a bound its index only moves towards",
        ),
        (
            (
                "    y[blockIdx.x * dim + c] = cache[r] * sum;\n  }\n",
                "    y[blockIdx.x * dim + c] = cache[r] * sum;\n  }\n  y[0] = 0.f;\n",
            ),
            "returns from inside, and statements follow it in the kernel",
        ),
    ],
)
def test_it_refuses_naming_why(edit: tuple[str, str], reason: str) -> None:
    # one loop with an exit at a time, so that the step's answer is the refusal
    first = ROUNDS.replace("    if (dim <= c) { return; }\n", "")
    last = ROUNDS.replace("    if (c >= dim) break;\n", "")
    source = (last if "return" in reason else first).replace(*edit)
    assert source not in (first, last)
    result = exits_to_checks(parse_source(source), "k")
    assert isinstance(result, str) and reason in result, result
