"""constexpr_arms: a body branching by `if constexpr` around its row loops read one arm at a time, from real
tree-sitter trees (template_arms: any `if` on the template parameters, anywhere in the body, the same way);
row_reduce's variant keeps the branch with each arm's rewrite (equal to the original at both instantiations on
emulated blocks), and refuses naming the arm."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

from cutune.cuda.extract import extract_kernel
from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.project import open_kernel
from cutune.template.recipes.base import KernelSource
from cutune.template.variants import VARIANT, combine_all
from cutune.template.variants.canonical import canonicalise
from cutune.template.variants.constexpr_arms import Arms, constexpr_arms, joined, one_arm, template_arms
from cutune.template.variants.model import Launch, Variant
from cutune.template.variants.row_reduce import RowReduce

from .compile import name_expressions
from .emulated import COMPARED, EMULATOR, emulated, emulated_unit

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
DATA = Path(__file__).resolve().parents[2] / "data" / "template" / "variants"

BRANCHED = """\
template <bool kSquares, bool kBias>
__global__ void k(float* out, const float* in, int n) {
  float s = 0.f;
  if constexpr (kSquares) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += in[i] * in[i];
  } else {
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += in[i];
  }
  if constexpr (!(kSquares)) s = -s;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    if constexpr (kSquares) { out[i] = s; }
    if constexpr (kBias) out[i] += 1.f;
  }
}
"""


def _arms(text: str) -> Arms | str | None:
    model = parse_source(text, "k.cu")
    return constexpr_arms(KernelSource(model, model.kernel("k")))


def _body(model_text: str) -> str:
    return " ".join(model_text.split())


def test_each_arm_is_the_body_its_instantiation_compiles() -> None:
    arms = _arms(BRANCHED)
    assert isinstance(arms, Arms)
    assert (arms.condition, arms.line) == ("kSquares", 4)
    yes, no = (_body(m.text) for m in arms.models)
    # the top-level arm's statements become the body's; the negated condition and the one in the loop resolve too
    assert "float s = 0.f; for (int i = threadIdx.x; i < n; i += blockDim.x) s += in[i] * in[i]; for" in yes
    assert "s = -s" not in yes and "{ out[i] = s; }" in yes
    assert "s += in[i]; s = -s; for" in no and "out[i] = s" not in no
    # another condition is left to the next reading of each arm
    assert "if constexpr (kBias) out[i] += 1.f;" in yes and "if constexpr (kBias) out[i] += 1.f;" in no
    assert "kSquares" not in yes.split("{", 1)[1] and "kSquares" not in no.split("{", 1)[1]
    # blanked, not removed: every line stays where the file has it
    assert all(m.text.count("\n") == BRANCHED.count("\n") for m in arms.models)


def test_no_arms_where_no_if_constexpr_holds_a_loop() -> None:
    assert _arms(BRANCHED.replace("if constexpr (kSquares) {", "if (kSquares) {")) is None


def test_a_condition_on_a_local_of_the_kernel_is_refused() -> None:
    text = BRANCHED.replace("  float s = 0.f;\n", "  constexpr bool kWide = sizeof(float) > 2;\n  float s = 0.f;\n")
    text = text.replace("if constexpr (kSquares) {", "if constexpr (kWide) {")
    assert _arms(text) == "`if constexpr (kWide)` (line 5) reads `kWide`, a local of the kernel"


def test_an_arm_declaring_a_name_the_body_declares_is_refused() -> None:
    text = BRANCHED.replace("  float s = 0.f;\n", "  float s = 0.f;\n  float t = 1.f;\n").replace(
        "  } else {\n", "    float t = s;\n  } else {\n"
    )
    assert _arms(text) == "where `kSquares` (line 5) is true, its arm declares `t` that the kernel's body declares too"


def test_an_arm_declaring_a_name_read_after_it_is_refused() -> None:
    # unwrapped, its `n` would be the one the loop after it reads, not the parameter
    text = BRANCHED.replace("  } else {\n", "    const int n = 4;\n  } else {\n")
    assert _arms(text) == (
        "where `kSquares` (line 4) is true, the arm at line 4 declares `n`, a name the statements after it read"
    )


def test_arms_needing_different_launches_are_not_joined() -> None:
    arms = _arms(BRANCHED)
    assert isinstance(arms, Arms)
    a = Variant("row_reduce", "a;", launch=Launch(("rows",), ("ROW_THREADS", "1")))
    b = Variant("row_reduce", "b;", launch=Launch(("ceil_div(rows, ROWS_PER_BLOCK)",), ("ROW_THREADS", "1")))
    assert joined(arms, a, b) == "the arms of `if constexpr (kSquares)` (line 4) need different launches"
    both = joined(arms, a, a)
    assert isinstance(both, Variant) and both.body == "if constexpr (kSquares) {\n  a;\n} else {\n  a;\n}"


def test_one_arm_is_kept_only_where_its_condition_is_one_template_argument() -> None:
    arms = _arms(BRANCHED)
    assert isinstance(arms, Arms)
    launch = Launch(("rows",), ("ROW_THREADS", "1"))
    kept = one_arm(arms, False, Variant("row_reduce", "a;", launch=launch), "b;")
    assert isinstance(kept, Variant) and kept.launch == launch
    assert kept.body == "if constexpr (!kSquares) {\n  a;\n} else {\n  b;\n}"
    assert kept.instantiation == (("kSquares", "false"),)
    other = dataclasses.replace(arms, condition="sizeof(T) == 2")
    assert one_arm(other, True, Variant("row_reduce", "a;"), "b;") == (
        "applies only where `sizeof(T) == 2` (line 4) is true, not one template argument"
    )


def _sample_model(text: str | None = None):  # type: ignore[no-untyped-def]
    path = SAMPLES / "constexpr_layer_norm.cu"
    model = parse_source(text if text is not None else path.read_text(), str(path))
    return canonicalise(model, "layer_norm_kernel").model


def test_row_reduce_rewrites_each_arm_of_the_sample_under_its_branch() -> None:
    variant = RowReduce().apply(_sample_model(), "layer_norm_kernel", None)
    yes, no = variant.body.split("\n} else {\n")
    assert yes.startswith("if constexpr (kOnePassVariance) {\n")
    # one pass: the sums of x and x^2 reduced together; two passes: the mean, then the centred squares; each arm's
    # in both copies of the row's code (rows that fit ROW_CAP packs a thread, longer rows)
    assert yes.count("cutune_rr_allreduce<ROW_THREADS>") == 4 and "sum_sq = cutune_rr_allreduce" in yes
    assert no.count("cutune_rr_allreduce<ROW_THREADS>") == 4 and "centred = cutune_rr_allreduce" in no
    assert "sum_sq" not in no and "centred" not in yes


def test_row_reduce_keeps_the_arm_it_can_rewrite_and_names_the_one_it_refuses() -> None:
    text = (SAMPLES / "constexpr_layer_norm.cu").read_text()
    text = text.replace("    centred = block_sum(centred);\n", "    atomicAdd(&s_rstd, centred);\n")
    # without a spec: the one-pass arm, for the instantiations that take it (the others run the original body)
    variant = RowReduce().apply(_sample_model(text), "layer_norm_kernel", None)
    assert variant.instantiation == (("kOnePassVariance", "true"),)
    spec = open_kernel(SAMPLES / "constexpr_layer_norm.cu", "layer_norm_kernel").require_spec()
    other = dataclasses.replace(spec, template_args={**spec.template_args, "kOnePassVariance": "false"})
    with pytest.raises(TransformRefused) as refused:
        RowReduce().apply(_sample_model(text), "layer_norm_kernel", other)
    assert refused.value.reason.startswith("updates memory with atomicAdd")
    # (lines of the canonical file, the block-sum helper inlined above them)
    assert re.search(r", where `kOnePassVariance` \(line \d+\) is false$", refused.value.reason)


# the sample's both arms on the host (warp_emulator.h: whole blocks of std::threads, barriers and shuffles met):
# the original and the row_reduce variant at several ROW_THREADS and ROW_VEC, the largest difference printed
HARNESS = (
    """
#include <random>
int main() {{
  const int tokens = 3, hidden = 1001;  // ragged: rows 4-byte aligned only, no ROW_THREADS * ROW_VEC divides it
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> in(tokens * hidden), gamma(hidden), beta(hidden);
  for (auto& v : in) v = 3.f + normal(rng);  // a mean away from 0: the arms' variances round differently
  for (auto& v : gamma) v = normal(rng);
  for (auto& v : beta) v = normal(rng);
  auto run = [&](auto kernel, unsigned block) {{
    std::vector<float> out(tokens * hidden, -1e30f);
    launch(tokens, block, [&] {{ kernel(out.data(), in.data(), gamma.data(), beta.data(), 1e-5f, hidden); }});
    return out;
  }};
"""
    + COMPARED
)


# (variant, its values, the block it runs): row_reduce on its own block, the others on the original's (1024 threads)
POINTS = [
    *(("row_reduce", {"ROW_THREADS": t, "ROW_VEC": v}, t) for t in (32, 128, 256) for v in (2, 4)),
    ("vectorized", {"VEC_BYTES": 16, "PACKS": 2}, 1024),
    ("vectorized", {"VEC_BYTES": 8, "PACKS": 1}, 1024),
    ("packs_per_thread", {"ITEMS": 4}, 1024),
]


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
@pytest.mark.parametrize("one_pass", ["true", "false"])
def test_each_arms_variants_equal_the_original_on_emulated_blocks(one_pass: str, tmp_path: Path) -> None:
    path = SAMPLES / "constexpr_layer_norm.cu"
    ctx = open_kernel(path, "layer_norm_kernel")
    spec = dataclasses.replace(
        ctx.require_spec(),
        template_args={"T": "float", "kOnePassVariance": one_pass},
        sizes=({"tokens": 3, "hidden": 1001},),
    )
    combined = combine_all(ctx.template_model, "layer_norm_kernel", ctx.template, spec)
    assert combined.spec is not None
    names = [v.name for v in combined.variants]
    launch = combined.variants[names.index("row_reduce")].launch
    assert launch is not None and (launch.grid[0], launch.block[0]) == ("tokens", "ROW_THREADS")
    # the others keep the original's launch (block_items, alone and on row_reduce, whose launches its own tests
    # check, is not emulated here)
    launched = ("row_reduce", "block_items", "row_reduce_block_items")
    assert all(v.launch is None for v in combined.variants if v.name not in launched)
    default = combined.template.space.default()
    configs = [default, *({**default, VARIANT: 1 + names.index(n), **values} for n, values, _ in POINTS)]
    source, expressions = emulated_unit(combined, path, "layer_norm_kernel", configs, tmp_path)
    runs = "\n".join(
        f'  std::printf("{i} %g\\n", worst(run({e}, {block})));'
        for i, ((_, _, block), e) in enumerate(zip(POINTS, expressions[1:], strict=True))
    )
    (tmp_path / "emulated.cpp").write_text(source + HARNESS.format(original=expressions[0], runs=runs))
    worst = emulated(tmp_path)
    assert sorted(worst) == list(range(len(POINTS)))
    # outputs of size ~3: a sum in another order moves them by float32 roundings, an arm's mistake by far more
    assert max(worst.values()) < 1e-4, {f"{POINTS[i][0]} {POINTS[i][1]}": d for i, d in worst.items()}


ARM_HARNESS = (
    """
#include <random>
int main() {{
  const int rows = 3, hidden = 1001;  // ragged, as above
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(rows * hidden), residual(rows * hidden), weight(hidden);
  for (auto& v : x) v = normal(rng);
  for (auto& v : residual) v = normal(rng);
  for (auto& v : weight) v = normal(rng);
  auto run = [&](auto kernel, unsigned block) {{  // the output, then the residual it updates in place
    std::vector<float> out(rows * hidden, -1e30f), res = residual;
    launch(rows, block, [&] {{ kernel(out.data(), res.data(), x.data(), weight.data(), hidden, 1e-6f); }});
    out.insert(out.end(), res.begin(), res.end());
    return out;
  }};
"""
    + COMPARED
)
ARM_POINTS = [{"ROW_THREADS": t, "ROW_VEC": v} for t in (32, 256) for v in (1, 4)]
_DYNAMIC = re.compile(r"extern\s+__shared__\s+(\w+)\s+(\w+)\[\];")


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
def test_the_variant_of_one_arm_equals_the_original_on_emulated_blocks(tmp_path: Path) -> None:
    # row_reduce read at kStaged = true only (the other arm carries a thread's last value): at that instantiation
    path = DATA / "arm_rms_norm.cu"
    ctx = open_kernel(path, "arm_rms_norm_kernel")
    spec = dataclasses.replace(ctx.require_spec(), sizes=({"rows": 3, "hidden": 1001},))
    combined = combine_all(ctx.template_model, "arm_rms_norm_kernel", ctx.template, spec)
    assert combined.spec is not None
    names = [v.name for v in combined.variants]
    assert combined.variants[names.index("row_reduce")].instantiation == (("kStaged", "true"),)
    default = combined.template.space.default()
    configs = [default, *({**default, VARIANT: 1 + names.index("row_reduce"), **p} for p in ARM_POINTS)]
    expressions = name_expressions(combined.template, combined.spec, configs)
    unit = extract_kernel(
        parse_source(combined.template.source, str(path)), "arm_rms_norm_kernel", instantiations=expressions
    )
    (tmp_path / "cuda_runtime.h").write_text(f'#include "{EMULATOR}"\n')
    runs = "\n".join(
        f'  std::printf("{i} %g\\n", worst(run({e}, {p["ROW_THREADS"]})));'
        for i, (p, e) in enumerate(zip(ARM_POINTS, expressions[1:], strict=True))
    )
    source = _DYNAMIC.sub(r"\1* \2 = dynamic_shared<\1>();", unit.source)  # the emulator's dynamic shared memory
    (tmp_path / "emulated.cpp").write_text(
        f'#include "{EMULATOR}"\n{source}{ARM_HARNESS.format(original=expressions[0], runs=runs)}'
    )
    worst = emulated(tmp_path)
    assert sorted(worst) == list(range(len(ARM_POINTS)))
    assert max(worst.values()) < 1e-4, {str(ARM_POINTS[i]): d for i, d in worst.items()}


LAYOUT = """
template <bool kInterleaved, int kWidth>
__global__ void k(float* out, const float* in, int n, int stride) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    int a;
    if (kInterleaved) {
      a = 2 * i;
    } else {
      a = i;
    }
    if (stride > kWidth) a += 1;
    if (!kInterleaved) out[a] = in[a];
  }
}
"""


def test_template_arms_resolve_every_plain_if_on_the_parameters_anywhere_in_the_body() -> None:
    model = parse_source(LAYOUT, "k.cu")
    arms = template_arms(KernelSource(model, model.kernel("k")))
    assert isinstance(arms, Arms) and arms.condition == "kInterleaved"
    yes, no = (_body(m.text) for m in arms.models)
    # inside the loop each kept arm keeps its braces; the negated test is resolved with it
    assert "int a; { a = 2 * i; } if (stride > kWidth) a += 1; }" in yes
    assert "int a; { a = i; } if (stride > kWidth) a += 1; out[a] = in[a]; }" in no


def test_template_arms_leave_conditions_on_locals_arguments_or_memory() -> None:
    for condition in ("stride > 2", "in[0] > 0.f", "n"):
        model = parse_source(LAYOUT.replace("kInterleaved)", f"{condition})"), "k.cu")
        assert template_arms(KernelSource(model, model.kernel("k"))) is None, condition
