"""From a configuration to name expressions, compile options and compile keys."""

from __future__ import annotations

import dataclasses

import pytest

from cutune.cuda.model import Kernel
from cutune.cuda.parse import parse_source
from cutune.errors import SpecError
from cutune.spec import ArgSpec
from cutune.template.instantiate import compile_key, compile_options, instantiation
from cutune.template.model import Binding, Config, Space, Template, TunableParam
from cutune.template.templatize import templatize

from .kernels import load, spec_for


def templatized(shape: str) -> tuple[Template, Kernel]:
    model, kernel = load(shape)
    t = templatize(model, kernel)
    return t, parse_source(t.source, model.path).kernel(kernel)


def test_name_expression_follows_template_parameter_order() -> None:
    t, k = templatized("merge_attn_states")
    spec = spec_for("merge_attn_states")
    name = k.qualified_name
    assert instantiation(k, name, spec, t.space, t.space.default(), {"head_size": 128}) == (
        "merge_attn_states_kernel<__nv_bfloat16, 128, 0, 1, 0, 0>"
    )
    tuned = Config.of({**t.space.default(), "NUM_THREADS": 256, "ITEMS_PER_THREAD": 4, "SPECIALIZE_HEAD_SIZE": True})
    assert instantiation(k, name, spec, t.space, tuned, {"head_size": 128}) == (
        "merge_attn_states_kernel<__nv_bfloat16, 256, 0, 4, 0, 128>"
    )


def test_specialised_value_comes_from_the_spec_argument() -> None:
    t, k = templatized("silu_and_mul")
    spec = spec_for("silu_and_mul", args=(ArgSpec("d", "int32", value="hidden / 2"),))
    on = Config.of({**t.space.default(), "SPECIALIZE_D": True})
    assert instantiation(k, k.qualified_name, spec, t.space, on, {"hidden": 8192}) == (
        "serving::silu_and_mul_kernel<__half, 4096>"
    )
    with pytest.raises(SpecError, match="SPECIALIZE_D needs the value of d"):
        instantiation(k, k.qualified_name, spec_for("silu_and_mul"), t.space, on, {"hidden": 8192})


def test_parameters_outside_the_space_take_their_qualified_default() -> None:
    _, k = templatized("elementwise_return")
    assert instantiation(k, k.qualified_name, spec_for("elementwise_return"), Space(()), Config.of({}), {}) == (
        "ops::relu_kernel<float, ops::relu_kernel_tuning::ITEMS_PER_THREAD, 0>"
    )


def test_missing_type_argument_and_plain_kernels() -> None:
    t, k = templatized("elementwise_return")
    bare = spec_for("elementwise_if")  # no template arguments at all
    with pytest.raises(SpecError, match="no value for template parameter T of relu_kernel"):
        instantiation(k, k.qualified_name, bare, t.space, t.space.default(), {})
    model, kernel = load("shared_tile")
    plain = model.kernel(kernel)
    assert instantiation(plain, plain.qualified_name, bare, Space(()), Config.of({}), {}) == "block_sum_kernel"


def test_compile_options_format_flags_and_defines_after_the_specs_own() -> None:
    t, _ = templatized("elementwise_if")
    space = Space((*t.space.params, TunableParam("VEC", (1, 2), 1, Binding.DEFINE)))
    spec = dataclasses.replace(spec_for("elementwise_if"), flags=("-lineinfo",), defines={"MODE": "2"})
    assert compile_options(space, space.default(), spec) == (("-lineinfo",), {"MODE": "2", "VEC": "1"})
    tuned = Config.of({**space.default(), "FAST_MATH": True, "MAXRREGCOUNT": 64, "VEC": 2})
    assert compile_options(space, tuned, spec) == (
        ("-lineinfo", "--use_fast_math", "-maxrregcount=64"),
        {"MODE": "2", "VEC": "2"},
    )


def test_compile_key_is_shared_where_the_compiled_code_is() -> None:
    t, k = templatized("merge_attn_states")
    spec = spec_for("merge_attn_states")

    def key(size: int, **values: object) -> str:
        config = Config.of({**t.space.default(), **values})
        return compile_key(k, k.qualified_name, spec, t.space, config, {"head_size": size})

    assert key(64) == key(128)  # specialisation off: one build for every size
    assert key(64, SPECIALIZE_HEAD_SIZE=True) != key(128, SPECIALIZE_HEAD_SIZE=True)
    assert key(64, ITEMS_PER_THREAD=2) != key(64)
    assert key(64, FAST_MATH=True) != key(64)


def test_launch_parameters_share_the_compile_key() -> None:
    t, k = templatized("elementwise_if")
    spec = spec_for("elementwise_if")
    other_block = Config.of({**t.space.default(), "BLOCK_THREADS": 512})  # read by the launch only
    assert t.space.param("BLOCK_THREADS").binding is Binding.LAUNCH
    assert compile_key(k, k.qualified_name, spec, t.space, t.space.default(), {}) == (
        compile_key(k, k.qualified_name, spec, t.space, other_block, {})
    )
