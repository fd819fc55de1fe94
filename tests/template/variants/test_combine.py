"""with_variants: the combined kernel compiles at several configurations, is the original at VARIANT = 0,
and its space and spec launch choose each variant's own parameters and launch."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutune.cuda.parse import parse_source
from cutune.errors import CutuneError
from cutune.spec import load_spec
from cutune.template.expr import compile_expr
from cutune.template.model import Binding, Space, Template, TunableParam
from cutune.template.templatize import templatize
from cutune.template.variants import (
    TRANSFORMS,
    VARIANT,
    Launch,
    Provenance,
    Variant,
    keep_variant,
    propose_variants,
    winning_variant,
    with_variants,
)
from cutune.template.variants.model import joined_helpers
from tests.cuda.test_extract import needs_nvrtc

from .compile import compile_both, name_expressions

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
# the elementwise transforms (the row reductions have their own tests)
ELEMENTWISE = {name: TRANSFORMS[name] for name in ("vectorize", "packs_per_thread", "grid_shape")}


def _gated() -> tuple:
    path = SAMPLES / "gated_activation.cu"
    model = parse_source(path.read_text(), str(path))
    base = templatize(model, "act_and_mul_kernel")
    base_model = parse_source(base.source, str(path))
    spec = load_spec(SAMPLES / "gated_activation.tune.toml").kernel("act_and_mul_kernel")
    variants, _ = propose_variants(base_model, "act_and_mul_kernel", spec, transforms=ELEMENTWISE)
    template, combined = with_variants(base_model, "act_and_mul_kernel", variants, spec, base=base)
    return model, base, variants, template, combined, spec


def test_the_original_body_is_branch_zero_and_the_defaults_keep_it() -> None:
    _, base, variants, template, _, _ = _gated()
    assert [v.name for v in variants] == ["vectorized", "packs_per_thread"]
    body = base.source[base.source.index("const int64_t token_idx") :]
    original_loop = body[: body.index("\n}")]
    branch = template.source[template.source.index("if constexpr (VARIANT == 0)") :]
    zero = branch[: branch.index("} else if constexpr (VARIANT == 1)")]
    # the same statements, one level deeper
    assert [ln.strip() for ln in original_loop.splitlines()] == [
        ln.strip() for ln in zero.splitlines()[3:] if ln.strip()
    ]
    assert "static constexpr int VARIANT = 0;" in template.source
    assert template.space.default()[VARIANT] == 0
    assert template.space.param(VARIANT).values == (0, 1, 2)


def test_variant_parameters_are_pinned_when_another_variant_runs() -> None:
    *_, combined, _ = _gated()
    names = {"max_threads_per_block": 1024, "warp_size": 32, "d": 4096, "num_tokens": 16, "BLOCK_THREADS": 1024}
    rules = [compile_expr(c) for c in combined.constraints]

    def feasible(**config: int) -> bool:
        return all(r.evaluate({**names, **config}) for r in rules)

    base = {"VARIANT": 0, "VEC_BYTES": 16, "PACKS": 1, "BLOCK_DIV": 1, "ITEMS": 2, "ITEMS_BLOCK_DIV": 1}
    assert feasible(**base)
    assert not feasible(**{**base, "PACKS": 4})  # a vectorized parameter, off while the original runs
    assert feasible(**{**base, "VARIANT": 1, "PACKS": 4})
    assert not feasible(**{**base, "VARIANT": 2, "PACKS": 4})


def test_the_spec_launch_follows_the_variant() -> None:
    *_, combined, spec = _gated()
    names = {"d": 4096, "num_tokens": 16, "BLOCK_THREADS": 1024, "warp_size": 32, "ITEMS_BLOCK_DIV": 1}
    block = compile_expr(combined.block[0])
    assert block.evaluate({**names, "VARIANT": 0, "BLOCK_DIV": 4}) == 1024  # the original ignores BLOCK_DIV
    assert block.evaluate({**names, "VARIANT": 1, "BLOCK_DIV": 4}) == 256
    assert block.evaluate({**names, "VARIANT": 1, "BLOCK_DIV": 8, "d": 128}) == 32  # never below a warp
    assert combined.grid == spec.grid  # no variant changes the grid: the expression stays as written


def test_a_variant_with_fewer_threads_keeps_the_grids_other_axes() -> None:
    # fewer threads per block for a loop over x, on a grid whose y and z pick a channel and a batch: the variant's
    # launch keeps those (run 89 on an H200: launched over x alone, the variants left all but one channel of one
    # batch unwritten, and the checks rejected them); a 1-D spec keeps its one dimension
    path = SAMPLES / "batched_points.cu"
    model = parse_source(path.read_text(), str(path))
    spec = load_spec(SAMPLES / "batched_points.tune.toml").kernel("gather_points_kernel")
    variants, _ = propose_variants(model, "gather_points_kernel", spec, transforms=ELEMENTWISE)
    assert [v.name for v in variants] == ["vectorized", "packs_per_thread"]
    _, combined = with_variants(model, "gather_points_kernel", variants, spec)
    assert combined is not None
    names = {"b": 8, "c": 128, "n": 16384, "m": 4096, "BLOCK_THREADS": 256, "warp_size": 32}
    names |= {"max_threads_per_block": 1024, "VEC_BYTES": 16, "PACKS": 2, "ITEMS": 4}
    for variant in (1, 2):  # the grid over x as the spec's (blockIdx.y and .z are read: no fewer blocks)
        grid, block, _ = combined.launch({**names, "VARIANT": variant, "BLOCK_DIV": 2, "ITEMS_BLOCK_DIV": 2})
        assert grid == (16, 128, 8) and block == (128, 1, 1), (variant, grid, block)
    assert len(combined.grid) == 3 and len(_gated()[4].grid) == 1


@pytest.mark.nvcc
@needs_nvrtc
def test_the_combined_kernel_compiles_with_nvcc_and_nvrtc_at_several_configurations(tmp_path: Path) -> None:
    *_, template, combined, _ = _gated()
    configs = [
        {},
        {"VARIANT": 1},
        {"VARIANT": 1, "VEC_BYTES": 8, "PACKS": 4},
        {"VARIANT": 1, "VEC_BYTES": 8},
        {"VARIANT": 2, "ITEMS": 8},
    ]
    expressions = name_expressions(template, combined, configs)
    assert expressions[1].endswith("<__nv_bfloat16, 0, 1, 16, 1, 2>")
    entries, lowered = compile_both(template, expressions, tmp_path)
    assert len(set(entries)) == len(configs) and set(lowered) == set(expressions)


def test_composes_with_a_spec_that_lists_no_parameters_and_with_no_spec() -> None:
    path = SAMPLES / "gated_activation.cu"
    model = parse_source(path.read_text(), str(path))
    variants, _ = propose_variants(model, "act_and_mul_kernel", None, transforms=ELEMENTWISE)
    template, spec = with_variants(model, "act_and_mul_kernel", variants, None)
    assert spec is None and template.space.params[0].name == VARIANT
    assert "template <typename scalar_t, int VARIANT = act_and_mul_kernel_tuning::VARIANT" in template.source


def test_launch_placeholders_and_clashing_names() -> None:
    source = (
        "__global__ void k(float* o, int n) {\n  for (int i = threadIdx.x; i < n; i += blockDim.x) o[i] = 1.f;\n}\n"
    )
    model = parse_source(source)
    spec = load_spec(SAMPLES / "gated_activation.tune.toml").kernel("act_and_mul_kernel")
    wide = Variant(
        "wide",
        "  o[threadIdx.x] = 2.f;",
        (TunableParam("W", (1, 2), 1, Binding.LAUNCH),),
        launch=Launch(grid=("{grid} * W", "2"), block=("{block}",)),
        provenance=Provenance("test"),
    )
    _, combined = with_variants(model, "k", [wide], spec)
    assert combined is not None
    assert combined.grid == ("((num_tokens) * W) if VARIANT == 1 else (num_tokens)", "(2) if VARIANT == 1 else (1)")
    assert combined.block == spec.block
    other_w = (TunableParam("W", (1, 4), 1, Binding.LAUNCH),)  # the same name, another parameter
    with pytest.raises(CutuneError, match="parameter W is already a parameter of variant wide"):
        with_variants(model, "k", [wide, Variant("again", "", other_w)], None)
    shared, _ = with_variants(model, "k", [wide, Variant("again", "  o[0] = 3.f;", wide.params)], spec)
    assert "VARIANT == 1 or VARIANT == 2 or W == 1" in shared.space.constraints  # one W, free in both


def test_a_parameter_two_variants_bind_differently_is_one_template_argument() -> None:
    source = "__global__ void k(float* o) {\n  o[threadIdx.x] = 1.f;\n}\n"
    launch = TunableParam("Y", (1, 2), 1, Binding.LAUNCH, description="rows")
    argument = TunableParam("Y", (1, 2), 1, Binding.TEMPLATE, description="rows; own arrays")
    template, _ = with_variants(
        parse_source(source),
        "k",
        [Variant("a", "  o[0] = 2.f;", (launch,)), Variant("b", "  o[0] = Y;", (argument,))],
        None,
    )
    assert template.space.param("Y").binding is Binding.TEMPLATE and "static constexpr int Y = 1;" in template.source
    # other values are another parameter of the same name still
    other = TunableParam("Y", (1, 4), 1, Binding.LAUNCH)
    with pytest.raises(CutuneError, match="parameter Y is already a parameter of variant"):
        with_variants(parse_source(source), "k", [Variant("a", "", (other,)), Variant("b", "", (argument,))], None)


def test_each_guarded_helper_once_however_many_variants_bring_it() -> None:
    one = "#ifndef CUTUNE_ONE\n#define CUTUNE_ONE\n__device__ int one() { return 1; }\n#endif  // CUTUNE_ONE"
    two = "#ifndef CUTUNE_TWO\n#define CUTUNE_TWO\n__device__ int two() { return 2; }\n#endif"
    plain = "__device__ int three() { return 3; }"
    assert joined_helpers(one, f"{one}\n\n{two}", plain, f"{two}\n{plain}") == f"{one}\n\n{two}\n\n{plain}"
    source = "__global__ void k(float* o) {\n  o[threadIdx.x] = 1.f;\n}\n"
    template, _ = with_variants(
        parse_source(source),
        "k",
        [Variant("a", "  o[0] = one();", helpers=one), Variant("b", "", helpers=f"{one}\n\n{two}")],
        None,
    )
    assert template.source.count("__device__ int one()") == 1 and template.source.count("__device__ int two()") == 1


def test_a_variants_own_constraints_bind_only_where_it_runs() -> None:
    model = parse_source(
        "__global__ void k(float* o, int n) {\n  for (int i = threadIdx.x; i < n; i += blockDim.x) o[i] = 1.f;\n}\n"
    )
    spec = load_spec(SAMPLES / "gated_activation.tune.toml").kernel("act_and_mul_kernel")
    rows = Variant(
        "rows",
        "  o[threadIdx.x] = 2.f;",
        (TunableParam("R", (1, 2, 4), 1, Binding.LAUNCH), TunableParam("T", (64, 256), 64, Binding.LAUNCH)),
        constraints=("R == 1 or T <= 128",),
        provenance=Provenance("test"),
    )
    template, combined = with_variants(model, "k", [Variant("other", "  o[0] = 3.f;", ()), rows], spec)
    assert combined is not None and "VARIANT != 2 or (R == 1 or T <= 128)" in combined.constraints
    rules = [compile_expr(c) for c in template.space.constraints if "BLOCK_THREADS" not in c]  # the spec's own

    def feasible(**config: int) -> bool:
        return all(r.evaluate(config) for r in rules)

    assert feasible(VARIANT=1, R=1, T=64) and not feasible(VARIANT=1, R=2, T=64)  # pinned while another runs
    assert feasible(VARIANT=2, R=2, T=64) and feasible(VARIANT=2, R=1, T=256)
    assert not feasible(VARIANT=2, R=2, T=256)


@pytest.mark.nvcc
@needs_nvrtc
def test_keeping_the_winning_variant_leaves_only_its_body_and_compiles(tmp_path: Path) -> None:
    _, base, variants, *_ = _gated()
    base_model = parse_source(base.source)
    kept = keep_variant(base_model, "act_and_mul_kernel", variants[0], {"PACKS": 2, "BLOCK_DIV": 4})
    assert VARIANT not in kept and "if constexpr" not in kept
    assert "static constexpr int PACKS = 2;" in kept and "static constexpr int BLOCK_DIV = 4;" in kept
    assert "// cutune: variant vectorized (vectorize: " in kept and "cutune_vec_store<" in kept
    assert "// cutune: its launches below use grid = {grid}; block = max(min(warp_size, {block})" in kept
    assert "dim3(block).x / serving::act_and_mul_kernel_tuning::BLOCK_DIV" in kept  # the host launch too
    template = Template("act_and_mul_kernel", kept, Space(()))
    entries, lowered = compile_both(template, ["serving::act_and_mul_kernel<__nv_bfloat16>"], tmp_path)
    assert len(entries) == 1 and len(lowered) == 1
    assert winning_variant([{"VARIANT": 1, "PACKS": 2}, {"VARIANT": 1}]) == 1
    assert winning_variant([{"VARIANT": 1}, {"VARIANT": 0}]) is None
