"""The spec loader: samples, KernelSpec helpers, line locator, and errors that name file, line and key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cutune.cuda.model import Kernel, Parameter, TemplateParam, TemplateParamKind
from cutune.cuda.text import Position, Span
from cutune.errors import SpecError
from cutune.limits import limits_for
from cutune.spec import (
    ArgSpec,
    KernelSpec,
    Role,
    Tolerance,
    check_against_kernel,
    default_tolerance,
    dtype_size,
    load_spec,
    parse_spec,
    spec_path_for,
)
from cutune.spec.locate import dotted, key_lines
from cutune.template.dtypes import C_TYPES
from cutune.template.model import Binding

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
DATA = ROOT / "tests" / "data" / "spec"
BAD = sorted(p for p in DATA.glob("*.tune.toml") if p.name != "good.tune.toml")
SPAN = Span(0, 0, Position(0, 0), Position(0, 0))


def names(spec: KernelSpec, size: dict[str, int]) -> dict[str, int]:
    assert spec.space is not None
    return {**size, **spec.space.default(), **limits_for("sm_90").as_names()}


def test_spec_path_is_beside_the_source() -> None:
    assert spec_path_for("samples/silu_and_mul.cu") == Path("samples/silu_and_mul.tune.toml")


def test_silu_sample_loads_with_launch_param() -> None:
    spec = load_spec(SAMPLES / "silu_and_mul.tune.toml").kernel("silu_and_mul_kernel")
    assert spec.template_args == {"T": "__nv_bfloat16"}
    assert [a.name for a in spec.args] == ["out", "input", "d"]
    assert spec.space is not None
    block = spec.space.param("BLOCK_THREADS")
    assert block.binding is Binding.LAUNCH and block.default == 1024
    assert spec.launch(names(spec, {"num_tokens": 16, "d": 4096})) == ((16, 1, 1), (1024, 1, 1), 0)
    assert spec.launch({**names(spec, {"num_tokens": 16, "d": 512})}) == ((16, 1, 1), (512, 1, 1), 0)
    assert spec.array_shapes({"num_tokens": 16, "d": 4096}) == {"out": (16, 4096), "input": (16, 8192)}
    assert spec.scalar_values({"num_tokens": 16, "d": 4096}) == {"d": 4096}
    # bf16: out written once (16*4096*2) + input read once (16*8192*2)
    assert spec.moved_bytes({"num_tokens": 16, "d": 4096}) == 393216
    assert spec.effective_tolerance() == Tolerance(rtol=1e-2, atol=1e-2)
    assert all(s["d"] % 8 == 0 for s in spec.sizes)
    l2 = limits_for("sm_90").l2_bytes
    moved = [spec.moved_bytes(s) for s in spec.sizes]
    assert min(moved) < l2 < max(moved)


def test_merge_sample_grid_follows_num_threads() -> None:
    spec = load_spec(SAMPLES / "merge_attn_states.tune.toml").kernel("merge_attn_states_kernel")
    assert [a.name for a in spec.args][:4] == ["output", "output_lse", "prefix_output", "prefix_lse"]
    assert spec.args[3].scale == 3.0 and spec.args[1].dtype == "float32"
    size = {"num_tokens": 512, "num_heads": 32, "head_size": 128}
    grid, block, smem = spec.launch(names(spec, size))
    assert (grid, block, smem) == ((512 * 32 * 16 // 128, 1, 1), (128, 1, 1), 0)
    assert spec.launch({**names(spec, size), "NUM_THREADS": 512})[0] == (512, 1, 1)
    # each block covers ITEMS_PER_THREAD blocks' worth of packs: the grid shrinks by as much
    assert spec.launch({**names(spec, size), "NUM_THREADS": 512, "ITEMS_PER_THREAD": 4})[0] == (128, 1, 1)
    assert spec.space is not None and "NUM_THREADS <= max_threads_per_block" in spec.space.constraints


def test_default_bytes_count_inout_twice_and_expression_overrides() -> None:
    args = (
        ArgSpec("acc", "float32", Role.INOUT, shape=("n",)),
        ArgSpec("x", "float16", Role.IN, shape=("n", "2")),
        ArgSpec("n", "int32", value="n"),
    )
    spec = KernelSpec("k", args, ({"n": 10},), ("1",), ("32",))
    assert spec.moved_bytes({"n": 10}) == 2 * 10 * 4 + 20 * 2
    custom = KernelSpec("k", args, ({"n": 10},), ("1",), ("32",), bytes_moved="n * V", constraints=())
    assert custom.moved_bytes({"n": 10}, {"V": 3}) == 30


def test_default_tolerance_is_loosest_over_outputs() -> None:
    f32_out = ArgSpec("o", "float32", Role.OUT, shape=("n",))
    bf16_in = ArgSpec("x", "bfloat16", Role.IN, shape=("n",))
    assert default_tolerance([f32_out, bf16_in]) == Tolerance(1e-5, 1e-6)
    assert default_tolerance([f32_out, ArgSpec("h", "float16", Role.INOUT, shape=("n",))]) == Tolerance(1e-2, 1e-2)
    assert default_tolerance([ArgSpec("d", "float64", Role.OUT, shape=("n",))]) == Tolerance(1e-12, 1e-12)
    assert default_tolerance([ArgSpec("i", "int32", Role.OUT, shape=("n",))]) == Tolerance(0.0, 0.0)
    assert dtype_size("bfloat16") == 2 and dtype_size("int64") == 8
    with pytest.raises(SpecError, match="unknown dtype 'float8'"):
        dtype_size("float8")


def test_good_spec_reads_every_field() -> None:
    spec = load_spec(DATA / "good.tune.toml").kernel("scale")
    x = spec.args[1]
    assert (x.init.value, x.low, x.high, x.line) == ("uniform", 0.5, 2.0, 17)
    assert spec.line == 2 and spec.line_of("args[2].value") == 28 and spec.line_of("sizes[1].n") == 8
    assert spec.line_of("args[2].init") == 25  # not written: the arg's header
    assert spec.constraints == ("BLOCK <= max_threads_per_block",)


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name.removesuffix(".tune.toml"))
def test_malformed_spec_names_file_line_and_key(path: Path) -> None:
    expect = re.match(r"# expect: (\d+) \| (\S+) \| (.+)\n", path.read_text())
    assert expect, f"{path.name} needs an `# expect: line | key | message` first line"
    line, key, fragment = int(expect[1]), expect[2], expect[3]
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    error = caught.value
    assert (error.path, error.line) == (str(path), line), str(error)
    assert error.key == (None if key == "-" else key), str(error)
    assert fragment in str(error) and str(error).startswith(f"{path}:{line}:")


def test_launch_errors_point_at_the_key() -> None:
    spec = load_spec(DATA / "good.tune.toml").kernel("scale")
    with pytest.raises(SpecError) as caught:
        spec.launch({"n": 1000, "BLOCK": 0})
    assert caught.value.line == 3 and caught.value.key == "kernel.scale.grid"
    assert "ceil_div() by zero" in str(caught.value)
    silu = load_spec(SAMPLES / "silu_and_mul.tune.toml").kernel("silu_and_mul_kernel")
    with pytest.raises(SpecError, match=r"toml:8: \[kernel.silu_and_mul_kernel.block\] .* gives 0, less than 1"):
        silu.launch({"num_tokens": 4, "d": 4096, "BLOCK_THREADS": 0})
    with pytest.raises(SpecError, match=r"3: \[kernel.scale.grid\] 'ceil_div\(n, BLOCK\)' gives 0"):
        spec.launch({"n": 0, "BLOCK": 256})


def test_missing_file_and_unknown_kernel() -> None:
    with pytest.raises(SpecError, match="no tuning spec here"):
        load_spec(DATA / "absent.tune.toml")
    with pytest.raises(SpecError, match=r"no \[kernel.nope\] table \(kernels here: scale\)"):
        load_spec(DATA / "good.tune.toml").kernel("nope")
    with pytest.raises(SpecError, match=r"no \[kernel.<name>\] table"):
        parse_spec("# nothing\n", "empty.tune.toml")


def test_locator_finds_keys_through_strings_arrays_and_inline_tables() -> None:
    text = (
        "# a [comment] with = signs\n"  # 1
        'title = "a [not a table] # not a comment"\n'  # 2
        "[kernel.k]\n"  # 3
        "grid = [\n"  # 4
        '  "a,b",\n'  # 5
        "  # between\n"  # 6
        "  'c]',\n"  # 7
        "]\n"  # 8
        'tolerance = { rtol = 1, "odd key" = 2 }\n'  # 9
        'doc = """two\n'  # 10
        'lines [x] = 1"""\n'  # 11
        "sub.key = 3\n"  # 12
        "[[kernel.k.args]]\n"  # 13
        "name = 'a'\n"  # 14
        "[[kernel.k.args]]\n"  # 15
        "\n"  # 16
        "name = 'b'\n"  # 17
    )
    lines = key_lines(text)
    assert lines[("title",)] == 2
    assert lines[("kernel", "k")] == 3
    assert lines[("kernel", "k", "grid", 0)] == 5 and lines[("kernel", "k", "grid", 1)] == 7
    assert lines[("kernel", "k", "tolerance", "odd key")] == 9
    assert lines[("kernel", "k", "sub", "key")] == 12
    assert ("lines [x]",) not in lines and ("x",) not in lines
    assert lines[("kernel", "k", "args", 1)] == 15 and lines[("kernel", "k", "args", 1, "name")] == 17
    assert dotted(("kernel", "k", "args", 1, "odd key")) == 'kernel.k.args[1]."odd key"'


def _kernel(params: list[tuple[str, str]], templates: tuple[TemplateParam, ...] = ()) -> Kernel:
    return Kernel(
        name="scale",
        params=tuple(Parameter(n, t, SPAN) for n, t in params),
        template_params=templates,
        launch_bounds=None,
        span=SPAN,
        name_span=SPAN,
        body_span=SPAN,
        template_span=None,
    )


def test_check_against_kernel() -> None:
    spec = load_spec(DATA / "good.tune.toml").kernel("scale")
    block = TemplateParam(TemplateParamKind.VALUE, "BLOCK", "int", None, SPAN)
    check_against_kernel(spec, _kernel([("out", "float*"), ("x", "const float*"), ("n", "int")], (block,)))
    cases = [
        ([("out", "float*"), ("x", "const float*")], (), "args", "3 args (out, x, n) but scale takes 2"),
        (
            [("out", "float*"), ("y", "const float*"), ("n", "int")],
            (),
            "args[1].name",
            "the kernel's parameter 1 is 'y'",
        ),
        ([("out", "float*"), ("x", "const float*"), ("n", "int*")], (), "args[2]", "so it must be an array"),
        (
            [("out", "float*"), ("x", "const float*"), ("n", "int")],
            (TemplateParam(TemplateParamKind.TYPE, "T", "", None, SPAN),),
            "template_args",
            "template parameter 'T' of scale needs a value",
        ),
    ]
    for params, templates, key, message in cases:
        with pytest.raises(SpecError) as caught:
            check_against_kernel(spec, _kernel(params, templates))
        assert caught.value.key == f"kernel.scale.{key}" and message in str(caught.value)
        assert caught.value.line == spec.line_of(key) and caught.value.path == str(DATA / "good.tune.toml")


def test_a_size_weight_counts_in_the_overall_figure_and_is_not_a_size_variable() -> None:
    text = (DATA / "good.tune.toml").read_text()
    first = re.search(r"sizes = \[\s*\{([^}]*)\}", text)
    assert first is not None
    weighted = text.replace(first.group(0), first.group(0)[:-1] + ", weight = 8 }", 1)
    spec = parse_spec(weighted, "weighted.tune.toml").kernel("scale")
    assert "weight" not in spec.size_names() and spec.size_weights()[0] == 8.0
    assert spec.size_weights()[1:] == (1.0,) * (len(spec.sizes) - 1)
    assert load_spec(DATA / "good.tune.toml").kernel("scale").size_weights() == (1.0,) * len(spec.sizes)
    with pytest.raises(SpecError, match=r"sizes\[0\]\.weight\] weight must be positive, got -1"):
        parse_spec(weighted.replace("weight = 8", "weight = -1"), "bad.tune.toml")


def test_a_struct_by_value_is_a_bytes_scalar_and_only_a_scalar() -> None:
    text = (DATA / "good.tune.toml").read_text()
    scalar = '[[kernel.scale.args]]\nname = "r"\ndtype = "bytes8"\nvalue = "0x40200000bf800000"\n'
    spec = parse_spec(text + "\n" + scalar, "struct.tune.toml").kernel("scale")
    r = spec.args[-1]
    assert (r.dtype, dtype_size(r.dtype)) == ("bytes8", 8)
    assert spec.scalar_values(spec.sizes[0])["r"] == 0x40200000BF800000
    array = scalar.replace('value = "0x40200000bf800000"', 'shape = ["n"]')
    with pytest.raises(SpecError, match="bytes8 is a struct passed by value: it takes a `value`, not a `shape`"):
        parse_spec(text + "\n" + array, "struct.tune.toml")
    with pytest.raises(SpecError, match=r"bytesN \(a struct by value\)"):
        dtype_size("bytes")
    wide = scalar.replace("0x40200000bf800000", "0x140200000bf800000")  # 9 bytes in an 8-byte struct
    with pytest.raises(SpecError, match=r"r is 8 bytes: its value must be an integer from 0 to 0xffffffffffffffff"):
        parse_spec(text + "\n" + wide, "struct.tune.toml")


def test_a_launch_bound_pdl_needs_no_launch_expression() -> None:
    """A kernel that waits on griddepcontrol itself: PDL only sets the launch attribute."""
    text = (ROOT / "tests" / "data" / "spec" / "launch_unused.tune.toml").read_text().replace("CAP", "PDL")
    text = text.replace("values = [256, 1024]\ndefault = 1024", "values = [false, true]\ndefault = false")
    spec = parse_spec(text).kernel("scale")
    assert spec.space is not None and spec.space.param("PDL").binding is Binding.LAUNCH


def test_sixteen_bit_integers_are_dtypes_that_c_types_map_to() -> None:
    text = (DATA / "good.tune.toml").read_text()
    codes = '[[kernel.scale.args]]\nname = "codes"\ndtype = "uint16"\nrole = "out"\nshape = ["n"]\n'
    spec = parse_spec(text + "\n" + codes, "codes.tune.toml").kernel("scale")
    assert (spec.args[-1].dtype, dtype_size(spec.args[-1].dtype)) == ("uint16", 2)
    assert [C_TYPES[t] for t in ("uint16_t", "unsigned short", "int16_t", "short")] == ["uint16"] * 2 + ["int16"] * 2
