"""online_merge: an online softmax's per-round block maxima replaced by one merge after the loop, read from real
tree-sitter trees, checked textually and refused with its reason where the round is not the online form (the sample's
variant compiles with nvcc and NVRTC and equals the original on the GPU through canonical/test_samples*.py; here, on
the GPU too, on rows with masked and infinite logits, which the spec's random inputs never hold)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cutune.cuda.extract import extract_kernel
from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.project import open_kernel
from cutune.template.variants import TRANSFORMS, VARIANT, combine_all
from cutune.template.variants.online import MERGED, SKIP, OnlineMerge
from tests.cuda.test_extract import needs_nvrtc, nvrtc_compiled

from .compile import name_expressions

SAMPLE = Path(__file__).resolve().parents[3] / "samples" / "online_softmax.cu"
KERNEL = "online_softmax_kernel"


def _body(*edits: tuple[str, str]) -> str:
    text = SAMPLE.read_text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    return OnlineMerge().apply(parse_source(text, str(SAMPLE)), KERNEL, None).body


def test_registered_after_the_others_so_they_keep_their_numbers() -> None:
    assert isinstance(TRANSFORMS["online_merge"], OnlineMerge)
    assert list(TRANSFORMS)[-4:-1] == ["online_merge", "flat_rows", "thread_packs"]  # the other two came after it


def test_each_round_keeps_its_own_maximum_and_the_pairs_are_merged_once_after_the_loop() -> None:
    body = _body()
    loop, after = body.split("for (int r = 0;", 1)[1].split("// the threads' (maximum, sum of exps)", 1)
    # in the round: no reduction, the block-wide skip of a +inf round, the update by the thread's own maximum
    assert "Reduce(" not in loop and "s_round_max" not in loop
    assert f"const bool {SKIP}0 = __syncthreads_or(isinf(local_max) && local_max > 0);" in loop
    assert f"if (!{SKIP}0 && !isinf(local_max))" in loop
    assert "round_sum += __expf(lanes[k] - local_max);" in loop
    assert "partial = partial * __expf(row_max - new_max) + round_sum * __expf(local_max - new_max);" in loop
    # after it: the kernel's own reduction and broadcast over the running maxima, each sum rescaled to their maximum
    merge = after.split("const float total", 1)[0]
    assert f"float {MERGED}0 = BlockReduce(reduce_store).Reduce(row_max, MaxOp{{}});" in merge
    assert f"if (threadIdx.x == 0) s_round_max = {MERGED}0;" in merge and "__syncthreads();" in merge
    assert f"partial = isinf(row_max) ? 0.0f : partial * __expf(row_max - {MERGED}0);" in merge
    assert merge.rstrip().endswith(f"row_max = {MERGED}0;")
    assert after.count("BlockReduce(reduce_store)") == 2  # the merge, then the kernel's own sum


def test_a_lane_scaled_before_its_maximum_is_the_same_lane() -> None:
    body = _body(
        (
            "for (int k = 0; k < 4; ++k) local_max = fmaxf(local_max, lanes[k]);",
            "for (int k = 0; k < 4; ++k) {\n      scaled[k] = lanes[k] * 0.5f;\n"
            "      local_max = fmaxf(local_max, scaled[k]);\n    }",
        ),
        (
            "const float lanes[4] = {v.x, v.y, v.z, v.w};",
            "const float lanes[4] = {v.x, v.y, v.z, v.w};\n    float scaled[4];",
        ),
        ("round_sum += __expf(lanes[k] - round_max);", "round_sum += __expf(scaled[k] - round_max);"),
    )
    assert "round_sum += __expf(scaled[k] - local_max);" in body


@pytest.mark.parametrize(
    ("edits", "reason"),
    [
        # a round with no finite maximum would turn the sums to NaN per thread, not per block: no guard, no merge
        ((("if (!isinf(round_max)) {", "{"),), "does not end with `if (!isinf(round_max)) {...}`"),
        ((("Reduce(local_max, MaxOp{})", "Sum(local_max)"),), "otherwise than into a declared maximum"),
        ((("MaxOp{})", "MinOp{})"),), "not one value by a maximum"),
        ((("float local_max = -CUDART_INF_F;", "float local_max = 0.f;"),), "not a maximum the round starts at -inf"),
        # the sum's elements are not the ones the maximum was taken over
        (
            (("round_sum += __expf(lanes[k] - round_max)", "round_sum += __expf(lanes[3 - k] * 2.f - round_max)"),),
            "sums otherwise than",
        ),
        ((("+ round_sum * __expf(round_max - new_max)", "+ round_sum"),), "sets `partial` otherwise than"),
        # the update's own `local_max` would shadow the thread's maximum the variant puts in the round's place
        ((("new_max", "local_max"),), "names `local_max` again in the update"),
        ((("row_max = new_max;\n", "row_max = new_max;\n      partial += 1.f;\n"),), "not the online update's five"),
        # the broadcast's slot holds each round's maximum in the original, only the row's in the variant
        (
            (("const float inv_total = 1.f / s_total;", "const float inv_total = 1.f / s_total + 0.f * s_round_max;"),),
            "reads `s_round_max` outside the round's broadcast",
        ),
        (
            (
                (
                    "float local_max = -CUDART_INF_F;",
                    "float local_max = -CUDART_INF_F;\n    float previous = s_round_max;",
                ),
            ),
            "reads `s_round_max` outside the round's broadcast",
        ),
        ((("__syncthreads();\n    round_max = s_round_max;", "round_max = s_round_max;"),), "without a barrier"),
        # the merge must run where every thread that leaves the loop reaches the kernel's own reduction
        (
            (
                (
                    "const float total = BlockReduce(reduce_store).Sum(partial);",
                    "if (vocab < 0) return;\n  const float total = BlockReduce(reduce_store).Sum(partial);",
                ),
            ),
            "not followed by a block-wide reduction every thread reaches",
        ),
    ],
)
def test_refuses_with_its_reason(edits: tuple[tuple[str, str], ...], reason: str) -> None:
    with pytest.raises(TransformRefused, match="online_merge") as e:
        _body(*edits)
    assert reason in e.value.reason


def test_refuses_a_kernel_without_a_reduction_in_its_rounds() -> None:
    source = "__global__ void scale(float* x, int n) { for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] *= 2.f; }"
    with pytest.raises(TransformRefused, match="no loop reduces a maximum over the block in each round"):
        OnlineMerge().apply(parse_source(source), "scale", None)


@pytest.mark.gpu
@needs_nvrtc
def test_masked_and_infinite_rounds_are_skipped_as_the_original_skips_them(tmp_path: Path) -> None:
    import cupy

    ctx = open_kernel(SAMPLE, KERNEL)
    combined = combine_all(ctx.template_model, KERNEL, ctx.template, ctx.spec)
    assert combined.spec is not None and [v.name for v in combined.variants] == ["online_merge"]
    default = combined.template.space.default()
    expressions = name_expressions(combined.template, combined.spec, [{**default, VARIANT: k} for k in (0, 1)])
    unit = extract_kernel(
        parse_source(combined.template.source, str(SAMPLE)), KERNEL, instantiations=expressions, for_nvrtc=True
    )
    ptx, lowered = nvrtc_compiled(unit)
    (tmp_path / "online.ptx").write_text(ptx)
    module = cupy.RawModule(path=str(tmp_path / "online.ptx"))  # CuPy loads PTX from a file, by mangled names
    vocab = 4100  # 5 rounds of 256 threads × 4 logits, the last one partial
    logits = np.random.default_rng(7).standard_normal((6, vocab)).astype(np.float32)
    logits[1, :1000] = -np.inf  # a round masked all but its last threads: they hold logits, the others none
    logits[2, 1024:2048] = -np.inf  # a whole round masked, and the partial last round
    logits[2, 4096:] = -np.inf
    logits[3, 2000] = np.inf  # the original drops that whole round from the statistics
    logits[4, :] = -np.inf  # nothing left: both divide 0 by 0
    logits[5] *= 30.0  # the running maximum moves far between rounds
    x = cupy.asarray(logits)
    outputs = []
    for expression in expressions:
        y = cupy.full(logits.shape, 7.0, dtype=cupy.float32)
        kernel = module.get_function(lowered[expression])
        kernel((logits.shape[0], 1, 1), (256, 1, 1), (y, x, np.int32(vocab)))
        outputs.append(y.get())
    original, variant = outputs
    assert np.isinf(original[3, 2000]) and np.isnan(original[4]).all()  # the rows are the edge cases meant
    np.testing.assert_allclose(variant, original, rtol=1e-4, atol=1e-6, equal_nan=True)
