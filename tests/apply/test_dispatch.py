"""Where a variant read at one instantiation of a kernel template launches: only at launches of that instantiation."""

from __future__ import annotations

import dataclasses

import pytest

from cutune.apply.dispatch import variant_launch_config
from cutune.cuda.parse import parse_source
from cutune.template.model import Binding, Config, TunableParam
from cutune.template.recipes.base import KernelSource
from cutune.template.variants.combine import VARIANT
from cutune.template.variants.host_launch import HostLaunchError
from cutune.template.variants.model import Launch, Variant

SOURCE = """
template <bool kStaged, int kCols>
__global__ void k(const float* x, float* y, int n) { y[blockIdx.x * n + threadIdx.x] = x[threadIdx.x]; }

template <int N>
void launch_fixed(const float* x, float* y, int rows, int n) { k<true, N><<<rows, 128>>>(x, y, n); }

void launch(const float* x, float* y, int rows, int n) {
  k<true, 0><<<rows, 128>>>(x, y, n);
  k<false, 0><<<rows, 128>>>(x, y, n);
}
"""

VARIANT_AT = Variant(
    "row_reduce",
    "",
    params=(TunableParam("ROW_THREADS", (32, 64), 64, Binding.TEMPLATE),),
    launch=Launch(grid=("{grid}",), block=("ROW_THREADS", "1")),
    instantiation=(("kStaged", "true"), ("kCols", "0")),
)


def _sites() -> tuple[KernelSource, list]:  # type: ignore[type-arg]
    model = parse_source(SOURCE)
    src = KernelSource(model, model.kernel("k"))
    return src, src.launches()


def test_a_specialised_variant_launches_only_where_its_instantiation_runs() -> None:
    src, launches = _sites()
    by_args = {site.template_args: (site, call) for site, call in launches}
    config = Config.of({VARIANT: 1, "ROW_THREADS": 32})
    site, call = by_args[("true", "0")]
    written = variant_launch_config(src, site, call, config, [VARIANT_AT])
    assert written == ["rows", "dim3(32, 1)"]
    site, call = by_args[("false", "0")]  # another instantiation: the original body, launched as written
    assert variant_launch_config(src, site, call, config, [VARIANT_AT]) is None


def test_a_launch_whose_instantiation_is_not_known_here_cannot_take_it() -> None:
    src, launches = _sites()
    site, call = next((s, c) for s, c in launches if s.template_args == ("true", "N"))
    with pytest.raises(HostLaunchError, match="passes `N` for kCols"):
        variant_launch_config(src, site, call, Config.of({VARIANT: 1, "ROW_THREADS": 32}), [VARIANT_AT])


def test_a_variant_read_at_a_parameter_the_kernel_lacks_cannot_take_a_launch() -> None:
    src, launches = _sites()
    site, call = next((s, c) for s, c in launches if s.template_args == ("true", "0"))
    stale = dataclasses.replace(VARIANT_AT, instantiation=(("kOther", "1"),))  # recorded for another version
    with pytest.raises(HostLaunchError, match="a template parameter the kernel lacks"):
        variant_launch_config(src, site, call, Config.of({VARIANT: 1, "ROW_THREADS": 32}), [stale])
