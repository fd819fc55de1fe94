"""apply_config: tuned values into the tuning struct, specialised sizes as a dispatch at the launches,
compile flags returned for the spec; the result re-parses, re-templatizes and compiles."""

from __future__ import annotations

import pytest

from cutune.apply.config import apply_config
from cutune.cuda.parse import parse_source
from cutune.errors import SourceError
from cutune.template.edits import apply_edits
from cutune.template.model import Config, Template
from cutune.template.templatize import templatize
from tests.template.kernels import in_parallel, load, nvcc


def templatized(shape: str, *recipes: str) -> tuple[Template, str]:
    model, kernel = load(shape)
    return templatize(model, kernel, recipes=recipes or None), kernel


def applied(
    t: Template, kernel: str, values: dict[str, object], **specialized: list[int]
) -> tuple[str, tuple[str, ...]]:
    config = Config.of({**t.space.default(), **values})
    result = apply_config(parse_source(t.source), kernel, config, t.space, specialized_values=specialized)
    return apply_edits(t.source, result.edits), result.flags


def test_values_go_into_the_struct_and_flags_are_returned() -> None:
    t, kernel = templatized("elementwise_return")
    source, flags = applied(t, kernel, {"BLOCK_THREADS": 256, "ITEMS_PER_THREAD": 4, "FAST_MATH": True})
    assert "  static constexpr int BLOCK_THREADS = 256;   // threads per block\n" in source
    assert "  static constexpr int ITEMS_PER_THREAD = 4;  // consecutive block-chunks" in source
    assert flags == ("--use_fast_math",)
    again = templatize(parse_source(source), kernel)  # the applied values are the new defaults
    assert again.space.param("BLOCK_THREADS").default == 256
    assert again.space.param("ITEMS_PER_THREAD").default == 4
    assert again.source == source


def test_the_defaults_change_nothing() -> None:
    t, kernel = templatized("merge_attn_states")
    result = apply_config(parse_source(t.source), kernel, t.space.default(), t.space)
    assert result.edits == ()
    assert result.flags == ()


def test_specialised_sizes_dispatch_at_the_launch() -> None:
    t, kernel = templatized("elementwise_return")
    source, _ = applied(t, kernel, {"SPECIALIZE_GROUPS": True}, groups=[4, 8])
    ref = "ops::relu_kernel_tuning::ITEMS_PER_THREAD"
    assert (
        "  if (groups == 4) {\n"
        f"    ops::relu_kernel<float, {ref}, 4><<<grid, block>>>(out, in, n, groups);\n"
        "  } else if (groups == 8) {\n"
        f"    ops::relu_kernel<float, {ref}, 8><<<grid, block>>>(out, in, n, groups);\n"
        "  } else {\n"
        "    ops::relu_kernel<float><<<grid, block>>>(out, in, n, groups);\n"
        "  }\n"
    ) in source
    with pytest.raises(SourceError, match="already passes a specialised size"):
        applied(templatize(parse_source(source), kernel), kernel, {"SPECIALIZE_GROUPS": True}, groups=[16])


def test_dispatch_on_several_sizes_fills_the_parameters_between() -> None:
    t, kernel = templatized("merge_attn_states")
    source, _ = applied(
        t,
        kernel,
        {"SPECIALIZE_HEAD_SIZE": True, "SPECIALIZE_NUM_HEADS": True},
        head_size=[128],
        num_heads=[8, 32],
    )
    tuning = "merge_attn_states_kernel_tuning"
    assert "  if (head_size == 128 && num_heads == 8) {\n" in source
    assert (
        f"merge_attn_states_kernel<__nv_bfloat16, NUM_THREADS, {tuning}::MIN_BLOCKS, "
        f"{tuning}::ITEMS_PER_THREAD, 32, 128><<<grid, block, 0, stream>>>(\n"
    ) in source
    assert len(parse_source(source).launches_of(kernel)) == 3


@pytest.mark.parametrize(
    ("shape", "values", "message"),
    [
        (
            "elementwise_return",
            {"SPECIALIZE_GROUPS": True},
            "SPECIALIZE_GROUPS is on: give the values of groups",
        ),
        (
            "elementwise_return",
            {"NOPE": 1},
            "the configuration sets NOPE, which the space has no parameter for",
        ),
    ],
)
def test_refusals(shape: str, values: dict[str, object], message: str) -> None:
    t, kernel = templatized(shape)
    with pytest.raises(SourceError, match=message):
        apply_config(parse_source(t.source), kernel, Config.of({**t.space.default(), **values}), t.space)


def test_refuses_untemplatized_kernels_and_missing_members() -> None:
    model, kernel = load("elementwise_return")
    full = templatize(model, kernel)
    with pytest.raises(SourceError, match="relu_kernel is not templatized"):
        apply_config(model, kernel, full.space.default(), full.space)
    partial, _ = templatized("elementwise_return", "block_threads")
    with pytest.raises(SourceError, match="relu_kernel_tuning has no member ITEMS_PER_THREAD"):
        apply_config(parse_source(partial.source), kernel, full.space.default(), full.space)


def test_refuses_to_dispatch_a_launch_that_deduces_template_arguments() -> None:
    text = (
        "template <typename T>\n__global__ void k(T* x, int n, int m) {\n"
        "  const int i = threadIdx.x;\n  if (i < n) x[i] = x[i] / m;\n"
        "  for (int j = 0; j < m; ++j) x[j] = 0;\n}\n"
        "void f(float* x, int n, int m) { k<<<1, 256>>>(x, n, m); }\n"
    )
    t = templatize(parse_source(text), "k", recipes=["specialize"])
    with pytest.raises(SourceError, match="leaves template parameter T to be deduced"):
        apply_config(
            parse_source(t.source),
            "k",
            Config.of({"SPECIALIZE_M": True}),
            t.space,
            specialized_values={"m": [4]},
        )


def test_a_launch_through_a_local_takes_the_defaults_but_refuses_a_dispatch() -> None:
    text = (
        "template <typename T>\n__global__ void k(T* x, int n, int m) {\n"
        "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] = x[i] / m;\n"
        "  for (int j = 0; j < m; ++j) x[j] = 0;\n}\n"
        "void f(float* x, int n, int m) {\n  auto kernel = &k<float>;\n"
        "  kernel<<<(n + 255) / 256, 256>>>(x, n, m);\n}\n"
    )
    t = templatize(parse_source(text), "k", recipes=["block_threads", "specialize"])
    assert "kernel<<<" in t.source and "&k<float>" in t.source  # the launch is templatized where it is
    model = parse_source(t.source)
    defaults = apply_config(model, "k", Config.of({**t.space.default(), "BLOCK_THREADS": 128}), t.space)
    assert "BLOCK_THREADS = 128" in apply_edits(t.source, defaults.edits)
    with pytest.raises(SourceError, match=r"the launch at line \d+ calls k through the local `kernel`"):
        apply_config(model, "k", Config.of({"SPECIALIZE_M": True}), t.space, specialized_values={"m": [4]})


@pytest.mark.nvcc
def test_applied_sources_compile() -> None:
    relu, relu_kernel = templatized("elementwise_return")
    bounds, bounds_kernel = templatized("bounds_2")
    sources = {
        "relu": applied(
            relu,
            relu_kernel,
            {"BLOCK_THREADS": 512, "ITEMS_PER_THREAD": 2, "SPECIALIZE_GROUPS": True},
            groups=[4, 8],
        )[0],
        "dot4": applied(bounds, bounds_kernel, {"BLOCK": 256, "MIN_BLOCKS": 2, "UNROLL": 2, "ITEMS_PER_THREAD": 4})[0],
    }
    ptx = in_parallel({name: lambda s=s: nvcc(s) for name, s in sources.items()})
    assert ptx["relu"].count(".entry ") == 3  # the two specialisations and the general kernel
    assert ".maxntid 256, 1, 1\n.minnctapersm 2" in ptx["dot4"]
