"""templatize end to end: the registry, idempotence, and (with nvcc) that the rewritten source compiles
for several configurations and is the original kernel at its defaults."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest

from cutune.cuda.extract import extract_kernel
from cutune.cuda.parse import parse_source
from cutune.errors import CutuneError, SourceError
from cutune.gpu.compile import compile_resources
from cutune.gpu.resources import ResourceUsage
from cutune.limits import limits_for
from cutune.template.expr import compile_expr
from cutune.template.instantiate import instantiation
from cutune.template.model import Binding, Config, Space, Template, TunableParam, Value
from cutune.template.recipes import RECIPES
from cutune.template.templatize import _line_map, templatize

from .kernels import SAMPLES, SHAPES, in_parallel, kernel_entry, load, nvcc, spec_for

# shapes whose source templatize changes; the others only gain compile flags
REWRITTEN = (
    "elementwise_if",
    "elementwise_return",
    "return_in_loop",
    "grid_stride",
    "row_reduce",
    "bounds_1",
    "bounds_2",
    "merge_attn_states",
    "silu_and_mul",
)
# launch_bounds adds `__launch_bounds__(NUM_THREADS, 0)` where there were none: the PTX gains `.maxntid`
# and NVVM orders some instructions differently under it, so there the default must match the original in
# what ptxas allocates instead
BOUNDS_ADDED = ("merge_attn_states",)


def test_registry_lists_every_recipe_in_order_with_a_description() -> None:
    assert list(RECIPES) == [
        "block_threads",
        "grid_size",
        "launch_bounds",
        "unroll",
        "items_per_thread",
        "specialize",
        "index_bits",
        "vector_width",
        "compile_flags",
    ]
    assert all(r.description and r.name == name for name, r in RECIPES.items())


def test_unknown_recipe_or_kernel_is_an_error() -> None:
    model, kernel = load("elementwise_if")
    with pytest.raises(CutuneError, match="unknown recipe"):
        templatize(model, kernel, recipes=["unrol"])
    with pytest.raises(SourceError, match="no __global__ kernel named 'nope'"):
        templatize(model, "nope")


@pytest.mark.parametrize("shape", list(SHAPES))
def test_templatize_is_idempotent(shape: str) -> None:
    model, kernel = load(shape)
    first = templatize(model, kernel)
    again = templatize(parse_source(first.source, model.path), kernel)
    assert again.source == first.source
    assert again.space == first.space
    assert again.applied == first.applied
    assert "compile_flags" in first.applied


def test_templatize_extends_an_existing_struct() -> None:
    model, kernel = load("bounds_2")
    partial = templatize(model, kernel, recipes=["block_threads"])
    full = templatize(parse_source(partial.source), kernel)
    assert full.source.count("struct dot4_kernel_tuning {") == 1
    assert [p.name for p in full.space.params][:4] == ["BLOCK", "MIN_BLOCKS", "UNROLL", "UNROLL_2"]
    assert full.source == templatize(model, kernel).source


def test_refusals_point_at_lines_of_the_original_file() -> None:
    model, kernel = load("row_reduce")
    t = templatize(model, kernel)  # block_threads inserts the struct before items_per_thread looks
    assert t.applied[0] == "block_threads"
    reason = next(r.reason for r in t.refused if r.recipe == "items_per_thread")
    assert "(the loop at line 13 steps by blockDim.x)" in reason
    assert model.text.splitlines()[12].lstrip().startswith("for (int j = threadIdx.x;")


def test_the_line_map_is_each_shared_lines_place_in_the_original() -> None:
    original = [f"line {i}" for i in range(40)]
    seen = original[:10] + ["inserted"] * 3 + original[10:20] + original[21:]  # 3 lines in, 1 out: the rest moved
    line = _line_map(seen, original)
    expected = {n: original.index(text) + 1 for n, text in enumerate(seen, 1) if text in original}
    assert {n: line(n) for n in range(-1, len(seen) + 3) if line(n) is not None} == expected


# -- with nvcc -------------------------------------------------------------------------------------


def _configs(t: Template) -> list[Config]:
    """Configurations other than the defaults: every compile-time parameter at its next value after the
    default, at its smallest and at its largest (sizes specialised), where they meet the space's
    constraints on sm_90."""
    limits = limits_for("sm_90").as_names()
    compiled = [p for p in t.space.params if p.binding in (Binding.TEMPLATE, Binding.SPECIALIZE)]
    picks: list[Callable[[TunableParam], Value]] = [
        lambda p: p.values[(p.values.index(p.default) + 1) % len(p.values)],
        lambda p: min(p.values),
        lambda p: max(p.values),
    ]
    configs = [Config.of({**t.space.default(), **{p.name: pick(p) for p in compiled}}) for pick in picks]
    return [
        c
        for c in dict.fromkeys(configs)
        if c != t.space.default() and all(compile_expr(e).evaluate({**limits, **c}) for e in t.space.constraints)
    ]


def _unit(source: str, shape: str, space: Space, configs: list[Config]) -> str:
    """A compile unit of a shape's kernel in `source`, instantiated for each configuration."""
    model, kernel = parse_source(source), SHAPES[shape][1]
    k = model.kernel(kernel)
    size = {p.arg: 128 for p in space.params if p.arg}
    names = [instantiation(k, k.qualified_name, spec_for(shape), space, c, size) for c in configs]
    return extract_kernel(model, kernel, instantiations=names).source


def _sources(shape: str) -> tuple[Template, str, str]:
    """The template of a shape, and the original and templatized sources whose kernels should match: the
    whole files (host launches instantiate the defaults), or for the samples (torch host code) units."""
    model, kernel = load(shape)
    t = templatize(model, kernel)
    if SHAPES[shape][0].parent != SAMPLES:
        return t, model.text, t.source
    return (
        t,
        _unit(model.text, shape, Space(()), [Config.of({})]),
        _unit(t.source, shape, t.space, [t.space.default()]),
    )


@pytest.fixture(scope="module")
def builds() -> dict[str, object]:
    """Every compile the nvcc tests need, at once: PTX by shape and role, ptxas reports for BOUNDS_ADDED."""
    jobs: dict[str, Callable[[], object]] = {}
    for shape in REWRITTEN:
        t, original, default = _sources(shape)
        kernel = SHAPES[shape][1]
        jobs[f"{shape}/original"] = partial(nvcc, original)
        jobs[f"{shape}/default"] = partial(nvcc, default)
        jobs[f"{shape}/configs"] = partial(nvcc, _unit(t.source, shape, t.space, _configs(t)))
        if shape in BOUNDS_ADDED:
            jobs[f"{shape}/original.res"] = partial(compile_resources, original, kernel=kernel)
            jobs[f"{shape}/default.res"] = partial(compile_resources, default, kernel=kernel)
    return in_parallel(jobs)


@pytest.mark.nvcc
@pytest.mark.parametrize("shape", REWRITTEN)
def test_default_configuration_is_the_original_kernel(shape: str, builds: dict[str, object]) -> None:
    kernel = SHAPES[shape][1]
    original, default = builds[f"{shape}/original"], builds[f"{shape}/default"]
    assert isinstance(original, str) and isinstance(default, str)
    if shape not in BOUNDS_ADDED:
        assert kernel_entry(default, kernel) == kernel_entry(original, kernel)
        return
    before, after = builds[f"{shape}/original.res"], builds[f"{shape}/default.res"]
    assert isinstance(before, ResourceUsage) and isinstance(after, ResourceUsage)
    fields = ("registers", "spill_store_bytes", "spill_load_bytes", "stack_bytes", "shared_bytes", "barriers")
    assert [getattr(after, f) for f in fields] == [getattr(before, f) for f in fields]
    assert ".maxntid 128, 1, 1" in kernel_entry(default, kernel)


@pytest.mark.nvcc
@pytest.mark.parametrize("shape", REWRITTEN)
def test_templatized_kernel_compiles_for_other_configurations(shape: str, builds: dict[str, object]) -> None:
    model, kernel = load(shape)
    t = templatize(model, kernel)
    configs = _configs(t)
    assert configs, "every rewritten shape has a compile-time parameter to vary"
    ptx = builds[f"{shape}/configs"]
    assert isinstance(ptx, str)
    assert ptx.count(".entry ") == len(configs)
