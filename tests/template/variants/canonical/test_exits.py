"""loop_exits: an exit at a bound a loop's index only moves towards, read as the bounds check it is; a return on a
condition no iteration changes, first thing in the kernel's last loop, moved before the loop."""

from __future__ import annotations

import dataclasses

import pytest

from cutune.cuda.parse import parse_source
from cutune.project import open_kernel
from cutune.template.variants import PacksPerThread, propose_variants
from cutune.template.variants.canonical import canonicalise
from cutune.template.variants.canonical.exits import exits_to_checks
from tests.template.variants.compile import measured_failures, variant_alone

from .samples import SAMPLES

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


# points gathered per channel and batch (the grid's y and z) by a grid-stride loop that leaves first thing where
# they lie past the tensor's
GATHER = """
template <typename T>
__global__ void k(const int b, const int c, const int n, const int m, const T* __restrict__ points,
                  const int* __restrict__ idx, T* __restrict__ out) {
  const int batch = blockIdx.z;
  const int channel = blockIdx.y;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < m; p += blockDim.x * gridDim.x) {
    const int shift = 2 * channel;
    if (batch >= b || channel >= c) return;
    const int64_t row = static_cast<int64_t>(batch) * c + channel;
    out[row * m + p] = points[row * n + idx[batch * m + p]] * shift;
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


def test_a_return_on_a_condition_no_iteration_changes_moves_before_the_loop() -> None:
    body = _body(GATHER)
    assert "if(batch>=b||channel>=c)return;for(int64_tp=static_cast<int64_t>(blockIdx.x)" in body
    assert body.count("return") == 1 and "{constintshift=2*channel;constint64_trow=" in body
    canonical = canonicalise(parse_source(GATHER), "k")
    assert canonical.applied == ("loop_exits",)
    variants, _ = propose_variants(canonical.model, "k", None)
    assert {"vectorized", "packs_per_thread"} <= {v.name for v in variants}


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        # the condition reads memory, the index, or what a declaration before it sets: the exit stays where it is
        (("if (batch >= b || channel >= c)", "if (batch >= b || idx[batch] < 0)"), "not at a bound"),
        (("if (batch >= b || channel >= c)", "if (batch >= b || p >= c)"), "not at a bound"),
        (("if (batch >= b || channel >= c)", "if (batch >= b || shift >= c)"), "not at a bound"),
        (("const int shift = 2 * channel;", "const int shift = idx[p];"), "does more than declare arithmetic"),
        # a call may take the batch by reference and change it, an address or a reference may write it
        (("    const int64_t row", "    bump(batch);\n    const int64_t row"), "not at a bound"),
        (("    const int64_t row", "    int* at = &channel;\n    const int64_t row"), "not at a bound"),
        (("    const int64_t row", "    int& alias = channel;\n    const int64_t row"), "not at a bound"),
        (("  }\n}\n", "  }\n  out[0] = 0;\n}\n"), "statements follow it in the kernel"),
    ],
)
def test_a_return_stays_where_moving_it_could_change_what_runs(edit: tuple[str, str], reason: str) -> None:
    source = GATHER.replace(*edit)
    assert source != GATHER
    result = exits_to_checks(parse_source(source), "k")
    assert isinstance(result, str) and reason in result, result


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


@pytest.mark.gpu
def test_an_exit_dropped_instead_of_moved_is_caught_on_the_gpu() -> None:
    # planted wrong: the moved exit left out of the variant; the interpolation's grid rounds its channels up to whole
    # tiles, so the extra channels' threads then write over the next batch's rows (or past the tensor at the last)
    ctx = open_kernel(SAMPLES / "batched_points.cu", "three_interpolate_kernel")
    spec = ctx.require_spec()
    canonical = canonicalise(ctx.template_model, "three_interpolate_kernel").model
    variant = PacksPerThread().apply(canonical, "three_interpolate_kernel", spec)
    exit_ = "if (batch >= b || channel >= c) return;"
    assert variant.body.count(exit_) == 1 and variant.body.index(exit_) < variant.body.index("for (")
    wrong = dataclasses.replace(variant, body=variant.body.replace(exit_, ""))
    for planted, equal in ((variant, True), (wrong, False)):
        job = variant_alone(ctx, "three_interpolate_kernel", planted)
        passed, failed = measured_failures(job, spec, {"VARIANT"})
        assert (passed >= 1 and not failed) if equal else bool(failed), (planted is wrong, passed, failed)


def test_a_step_held_in_a_local_of_the_block_size_only_grows() -> None:
    # llama.cpp's `col0 += block_size` with `const int block_size = blockDim.x;` (its template constant folded)
    source = """
__global__ void k(const float* x, float* y, const int n) {
  const int block_size = blockDim.x;
  for (int col0 = 0; col0 < n; col0 += block_size) {
    const int col = col0 + threadIdx.x;
    if (col >= n) break;
    y[col] = x[col];
  }
}
"""
    assert "constintcol=col0+threadIdx.x;if(col<n){y[col]=x[col];}" in _body(source)
    written = source.replace("const int block_size = blockDim.x;", "int block_size = blockDim.x; block_size -= 64;")
    result = exits_to_checks(parse_source(written), "k")
    assert isinstance(result, str) and "its index is not one that only grows" in result
