"""ldg_reads: a read through the read-only cache written as the element read it is."""

from __future__ import annotations

from cutune.cuda.parse import parse_source
from cutune.template.variants.canonical.ldg import plain_ldg_reads

KERNEL = """
__global__ void k(float* y, const float* g, const float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = x[i] * __ldg(&g[i]) + __ldg(g + i);
}
"""


def test_an_element_read_through_ldg_is_a_plain_read_and_other_forms_stay() -> None:
    result = plain_ldg_reads(parse_source(KERNEL), "k")
    assert result is not None
    assert "y[i] = x[i] * g[i] + __ldg(g + i);" in result.text


def test_a_kernel_without_ldg_is_not_its_shape() -> None:
    assert (
        plain_ldg_reads(parse_source(KERNEL.replace("__ldg(&g[i])", "g[i]").replace("__ldg(g + i)", "1")), "k") is None
    )
