"""The pdl recipe: the kernel's body opens with griddepcontrol behind PDL, which NVRTC compiles both ways."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cutune.check import check_kernel
from cutune.cuda.parse import parse_source
from cutune.errors import RecipeRefused
from cutune.project import open_kernel
from cutune.template.model import PDL
from cutune.template.recipes.base import Draft
from cutune.template.recipes.pdl import Pdl
from cutune.workflow.pdl import with_pdl

ROOT = Path(__file__).resolve().parents[3]
SCALE = """\
__global__ void scale(float* out, const float* in, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = s * in[i];
}
"""


def _pdl(text: str) -> Draft:
    model = parse_source(text, "k.cu")
    return Pdl().apply(model, model.kernel("scale"), Draft(text))


def test_the_body_opens_with_the_wait_and_the_trigger_behind_the_parameter() -> None:
    draft = _pdl(SCALE)
    assert [p.name for p in draft.params] == [PDL] and draft.params[0].values == (False, True)
    body = draft.text[draft.text.index("void scale") :]
    assert body.index("if constexpr (PDL)") < body.index("griddepcontrol.wait") < body.index("int i =")
    assert "bool PDL = scale_tuning::PDL" in draft.text and "static constexpr bool PDL = false;" in draft.text
    again = _pdl(draft.text)  # templatizing twice changes nothing
    assert again.text == draft.text and [p.name for p in again.params] == [PDL]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (SCALE.replace("{\n", '{\n  asm volatile("griddepcontrol.wait;");\n', 1), "grid dependency already"),
        (SCALE.replace("__global__", 'extern "C" __global__'), 'extern "C"'),
    ],
)
def test_it_refuses_kernels_that_wait_already_or_take_no_template_parameters(text: str, reason: str) -> None:
    with pytest.raises(RecipeRefused, match=reason):
        _pdl(text)


def test_with_pdl_searches_pdl_beside_the_specs_own_parameters_and_both_values_compile() -> None:
    ctx = open_kernel(ROOT / "samples" / "silu_and_mul.cu", "silu_and_mul_kernel")
    searched = with_pdl(ctx)
    assert [p.name for p in searched.space.params] == [*(p.name for p in ctx.space.params), PDL]
    assert "pdl" in searched.template.applied and with_pdl(searched) is searched
    only_pdl = searched.space.varying(PDL)
    pinned = dataclasses.replace(searched, template=dataclasses.replace(searched.template, space=only_pdl))
    pinned = dataclasses.replace(pinned, spec=dataclasses.replace(pinned.require_spec(), space=None))
    report = check_kernel(pinned, limit=2, compiler="nvrtc", arch="sm_90")
    assert [(r.config[PDL], r.problem) for r in report.rows] == [(False, None), (True, None)]
