"""template_args: a kernel read at the spec's instantiation, the choices its constant template arguments make inside
expressions folded, and its variants kept for that instantiation only."""

from __future__ import annotations

import pytest

from cutune.cuda.parse import parse_source
from cutune.project import open_kernel
from cutune.template.variants import propose_variants
from cutune.template.variants.canonical import canonicalise
from cutune.template.variants.canonical.template_args import (
    fold_template_args,
    instantiation,
    literal_value,
    specialised,
)
from cutune.template.variants.model import Variant

from .samples import SAMPLES

CHOICES = """
template <bool kStaged, int kCols, typename T>
__global__ void k(const T* x, float* y, float* buf, int n_rt) {
  const int n = kCols == 0 ? n_rt : kCols;
  float* cache = kStaged ? buf : y;
  for (int c0 = 0; c0 < n; c0 += blockDim.x) {
    const int c = c0 + threadIdx.x;
    if (kCols == 0 && c >= n) break;
    if (kCols != 0 || c > 7) cache[c] = x[c];
  }
  if (kStaged) {
    y[0] = cache[0];
  }
}
"""


def _folded(args: dict[str, str]) -> str:
    result = fold_template_args(parse_source(CHOICES), "k", args)
    assert result is not None
    return result.text


def test_choices_inside_expressions_are_folded_at_the_instantiation() -> None:
    text = _folded({"kStaged": "true", "kCols": "0", "T": "float"})
    assert "const int n = (n_rt);" in text and "float* cache = (buf);" in text
    assert "if ((c >= n)) break;" in text  # `kCols == 0 && ...`: the other side alone
    assert "if ((c > 7)) cache[c] = x[c];" in text  # `kCols != 0 || ...`
    # an `if` on the arguments themselves stays for the arms the transforms read (their variants fit every instance)
    assert "if (kStaged) {" in text
    assert text.count("\n") == CHOICES.count("\n")  # the lines the refusals name stay the file's


def test_a_condition_a_fold_decides_goes_and_one_it_does_not_stays() -> None:
    text = _folded({"kStaged": "false", "kCols": "128", "T": "float"})
    assert "const int n = (kCols);" in text and "float* cache = (y);" in text
    assert "break" not in text  # `if (false) break;`
    assert "{ cache[c] = x[c]; }" in text  # `if (true || ...)`: the statement, braced
    assert "if (kStaged) {" in text


@pytest.mark.parametrize(
    "args",
    [
        {},  # no arguments
        {"T": "float"},  # a type: nothing to fold
        {"kStaged": "kFlag", "kCols": "N"},  # not literals: which instantiation is unknown
    ],
)
def test_nothing_is_folded_without_literal_arguments(args: dict[str, str]) -> None:
    assert fold_template_args(parse_source(CHOICES), "k", args) is None


def test_literals_and_the_instantiation_read() -> None:
    assert [literal_value(t) for t in ("true", "false", "0", "128u", "0x10", "N", "1.5f")] == [
        1,
        0,
        0,
        128,
        16,
        None,
        None,
    ]
    at = instantiation(parse_source(CHOICES), "k", {"kStaged": "true", "kCols": "0", "T": "float"})
    assert at == (("kStaged", "true"), ("kCols", "0"))


def test_the_pipeline_reads_the_spec_instantiation_first_and_says_so() -> None:
    args = {"kStaged": "true", "kCols": "0", "T": "float"}
    canonical = canonicalise(parse_source(CHOICES), "k", template_args=args)
    assert canonical.applied[0] == "template_args"
    assert canonical.instantiation == (("kStaged", "true"), ("kCols", "0"))
    # the offset-counted rounds with their exit are the stride loop once the constants are folded
    assert {"loop_exits", "counted_loops"} <= set(canonical.applied)
    assert canonicalise(parse_source(CHOICES), "k").instantiation == ()


def test_every_variant_runs_only_at_the_instantiation_it_was_read_at() -> None:
    path = SAMPLES / "template_softmax.cu"
    ctx = open_kernel(path, "template_softmax_kernel")
    assert ctx.spec is not None
    model = parse_source(path.read_text(), str(path))
    variants, _ = propose_variants(model, "template_softmax_kernel", ctx.spec)
    row_reduce = next(v for v in variants if v.name == "row_reduce")
    assert row_reduce.instantiation == (("kStaged", "true"), ("kCols", "0"), ("kBlock", "0"))
    assert row_reduce.body.startswith("if constexpr ((kStaged == true) && (kCols == 0) && (kBlock == 0)) {\n")
    span = model.kernel("template_softmax_kernel").body_span
    original = model.text[span.start_byte + 1 : span.end_byte - 1].strip("\n")
    assert row_reduce.body.endswith(f"\n}} else {{\n{original}\n}}")  # every other instantiation: as written


def test_a_variant_read_at_an_arm_keeps_that_arm_under_the_spec_instantiation() -> None:
    own = Variant("row_reduce", "a;", instantiation=(("kStaged", "true"),))
    kept = specialised(own, (("kCols", "0"), ("kStaged", "true")), "b;")
    assert kept.instantiation == (("kCols", "0"), ("kStaged", "true"))  # one pair a parameter
    assert specialised(own, (("kCols", "0"),), "b;").instantiation == (("kCols", "0"), ("kStaged", "true"))


def test_without_a_spec_a_refused_transform_is_read_at_the_files_literal_launch() -> None:
    path = SAMPLES / "template_softmax.cu"
    model = parse_source(path.read_text(), str(path))
    variants, refusals = propose_variants(model, "template_softmax_kernel", None)
    row_reduce = next(v for v in variants if v.name == "row_reduce")
    # the host launches `<true, 0, 0>` with literals: the kernel as that instantiation compiles it
    assert row_reduce.instantiation == (("kStaged", "true"), ("kCols", "0"), ("kBlock", "0"))
    assert row_reduce.provenance.note.startswith("at the file's launch of kStaged = true, kCols = 0, kBlock = 0: ")
    assert not [r for r in refusals if r.recipe == "row_reduce"]
    # a launch that passes a run-time value for a constant names no instantiation: the refusal stands
    text = path.read_text().replace("template_softmax_kernel<true, 0, 0>", "template_softmax_kernel<true, 0, kB>")
    variants, refusals = propose_variants(parse_source(text, str(path)), "template_softmax_kernel", None)
    assert "row_reduce" not in {v.name for v in variants} and [r for r in refusals if r.recipe == "row_reduce"]


def test_a_decimal_with_leading_zeros_is_no_literal_it_reads() -> None:
    assert literal_value("08") is None and literal_value("010") is None and literal_value("0") == 0
