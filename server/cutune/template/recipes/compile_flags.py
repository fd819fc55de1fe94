"""compile_flags: nvcc/NVRTC options that change code generation, with no change to the source."""

from __future__ import annotations

from cutune.cuda.model import Kernel, SourceModel
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import Draft, Recipe

FAST_MATH = TunableParam(
    "FAST_MATH",
    (False, True),
    False,
    Binding.FLAG,
    flag="--use_fast_math",
    description="fast, less accurate math intrinsics, flush-to-zero and approximate division",
)
MAXRREGCOUNT = TunableParam(
    "MAXRREGCOUNT",
    (0, 32, 64, 96, 128, 168, 255),
    0,
    Binding.FLAG,
    flag="-maxrregcount={}",
    description="cap on registers per thread (0 = the compiler's choice); __launch_bounds__ overrides it",
)


class CompileFlags(Recipe):
    name = "compile_flags"
    description = "compile flags: --use_fast_math and -maxrregcount"

    def apply(self, model: SourceModel, kernel: Kernel, draft: Draft) -> Draft:
        return draft.extend(FAST_MATH, MAXRREGCOUNT)
