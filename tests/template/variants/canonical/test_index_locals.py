"""index_locals: a loop body's locals that only name an element, written out at their uses, and the locals that
stay because writing them out could name another element."""

from __future__ import annotations

import pytest

from cutune.cuda.parse import parse_source
from cutune.template.variants import propose_variants
from cutune.template.variants.canonical.index_locals import substitute_index_locals

INDEXED = """
template <typename T>
__global__ void k(T* __restrict__ out, const T* __restrict__ in, T* __restrict__ residual, const T* __restrict__ w,
                  const long long in_stride, const float eps, const int n) {
  __shared__ float partial[32];
  __shared__ float inv;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const long long id = static_cast<long long>(blockIdx.x) * n + i;
    const long long strided = blockIdx.x * in_stride + i;
    const float z = static_cast<float>(in[strided]) + static_cast<float>(residual[id]);
    residual[id] = static_cast<T>(z);
    sum += z * z;
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int j = 0; j < static_cast<int>(blockDim.x / 32); ++j) total += partial[j];
    inv = rsqrtf(total / n + eps);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const long long id = blockIdx.x * (long long)n + i;
    out[id] = static_cast<T>(static_cast<float>(residual[id]) * inv * static_cast<float>(w[i]));
  }
}
"""


def _text(source: str) -> str:
    result = substitute_index_locals(parse_source(source), "k")
    assert result is not None, "the step found nothing to write out"
    return result.text


def test_the_locals_are_written_out_at_their_uses_and_their_declarations_go() -> None:
    text = _text(INDEXED)
    assert "const long long id" not in text and "const long long strided" not in text
    assert "in[blockIdx.x * in_stride + i]" in text
    assert "residual[static_cast<long long>(blockIdx.x) * n + i] = static_cast<T>(z);" in text
    assert "out[blockIdx.x * (long long)n + i] = " in text
    assert "\n\n    const float z" not in text  # the declarations' lines go whole


def test_row_reduce_reads_the_written_out_accesses_as_the_rows_elements() -> None:
    variants, refusals = propose_variants(parse_source(INDEXED), "k", None)
    assert "row_reduce" in {v.provenance.origin for v in variants}, [r.reason for r in refusals]


SINGLE = """
__global__ void k(float* out, const float* in, const int* starts, int m, const int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    long long id = static_cast<long long>(blockIdx.x) * m + i;
    out[id] = in[id] * 2.0f;
  }
}
"""


def test_a_single_local_is_written_out() -> None:
    assert "out[static_cast<long long>(blockIdx.x) * m + i] = in[static_cast<long long>(blockIdx.x) * m + i]" in (
        _text(SINGLE)
    )


def test_a_value_reading_an_earlier_local_of_the_body_is_written_out() -> None:
    source = SINGLE.replace(
        "    long long id = static_cast<long long>(blockIdx.x) * m + i;",
        "    const long long row = blockIdx.x;\n    long long id = row * m + i;",
    )
    assert "out[row * m + i] = in[row * m + i] * 2.0f;" in _text(source)


def test_a_division_of_what_does_not_read_the_index_is_written_out_too() -> None:
    text = _text(SINGLE.replace("static_cast<long long>(blockIdx.x) * m + i;", "blockIdx.x * m / 4 + i;"))
    assert "out[blockIdx.x * m / 4 + i] = in[blockIdx.x * m / 4 + i]" in text


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("in[id] * 2.0f;", "in[id] * id;"),  # read as a number
        ("* 2.0f;\n", "* 2.0f;\n    id += 1;\n"),  # written
        ("static_cast<long long>(blockIdx.x) * m + i;", "offset(blockIdx.x) * m + i;"),  # another call
        ("static_cast<long long>(blockIdx.x) * m + i;", "starts[blockIdx.x] + i;"),  # a memory read
        ("* m + i;", "* m + i + (n > 0 ? 1 : 0);"),  # a conditional
        ("* 2.0f;\n", "* 2.0f;\n    m -= 1;\n"),  # a name of its value changes in the body
        ("long long id", "float id"),  # not an integer
        ("* m + i;", "* m + i / 2;"),  # the index divided: a row of a flat index, kept for flat_rows
        ("out[id] = in[id] * 2.0f;", "{\n      const int m = 2;\n      out[id] = in[id] * 2.0f;\n    }"),  # shadowed
        ("static_cast<long long>(blockIdx.x) * m + i;", "static_cast<long long>(blockIdx.x) * m;"),  # no index
        # a name of its value declared again later in the body: written out after that, it would be the new one
        ("out[id] = in[id] * 2.0f;", "const int m = 2;\n    out[id] = in[id] * 2.0f;"),
    ],
)
def test_a_local_that_could_name_another_element_stays(old: str, new: str) -> None:
    assert old in SINGLE
    assert substitute_index_locals(parse_source(SINGLE.replace(old, new)), "k") is None


def test_a_local_also_computed_with_in_another_index_stays_for_it_and_its_whole_subscripts_are_written_out() -> None:
    text = _text(SINGLE.replace("out[id] =", "out[id * 2 + 1] ="))
    assert "long long id = " in text  # still read by `out[id * 2 + 1]`
    assert "out[id * 2 + 1] = in[static_cast<long long>(blockIdx.x) * m + i] * 2.0f;" in text


def test_a_local_read_only_inside_other_indices_stays_as_it_is() -> None:
    changed = SINGLE.replace("out[id] = in[id]", "out[id + 1] = in[id - 1]")
    assert substitute_index_locals(parse_source(changed), "k") is None
