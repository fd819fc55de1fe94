"""pdl: programmatic dependent launch as a parameter PDL. At PDL = true the kernel waits on the previous
kernel of its stream (`griddepcontrol.wait`) before its first statement and lets the next one start launching
(`griddepcontrol.launch_dependents`); launched with the programmatic-stream-serialization attribute, a kernel's
launch then overlaps the tail of the kernel before it.

Not one of templatize's default recipes: its gain exists only between back-to-back launches, which only graph
timing measures (a single launch timed alone sees none), so tuning adds it to the kernel it searches under
`--timing graph` (`workflow.pdl`). It rewrites the final kernel (variants combined), whose body it wraps whole.
At PDL = false the kernel is the original. Without the launch attribute the two instructions do nothing, so a
PDL kernel launched the ordinary way is correct too: only a launch *with* the attribute needs the wait.
"""

from __future__ import annotations

import re

from cutune.cuda.model import Kernel, SourceModel
from cutune.template.model import PDL, Binding, TunableParam
from cutune.template.recipes.base import Draft, KernelRewrite, KernelSource, Recipe

_COMMENT = "programmatic dependent launch: wait for the previous kernel, let the next one launch early"
# a kernel that already synchronises on its grid dependency decides its own placement of the two
_ALREADY = re.compile(r"griddepcontrol|cudaGridDependencySynchronize|cudaTriggerProgrammaticLaunchCompletion")


def prologue(indent: str, *, guard: str | None = None) -> str:
    """The lines that open a PDL kernel's body (after its `{`): the wait and the trigger, on architectures that
    have them, and behind `if constexpr (guard)` when a parameter decides."""
    inner = indent + "  " if guard else indent
    lines = [
        f'{inner}asm volatile("griddepcontrol.wait;" ::: "memory");',
        f'{inner}asm volatile("griddepcontrol.launch_dependents;" ::: "memory");',
    ]
    if guard:
        lines = [f"{indent}if constexpr ({guard}) {{  // {_COMMENT}", *lines, f"{indent}}}"]
    else:
        lines = [f"{indent}// {_COMMENT} (cutune)", *lines]
    return "\n#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n" + "\n".join(lines) + "\n#endif"


def pdl_param() -> TunableParam:
    """The PDL parameter: false is the original launch."""
    return TunableParam(PDL, (False, True), False, Binding.TEMPLATE, description=_COMMENT)


class Pdl(Recipe):
    name = "pdl"
    description = "programmatic dependent launch (griddepcontrol wait and launch_dependents) as a parameter"

    def apply(self, model: SourceModel, kernel: Kernel, draft: Draft) -> Draft:
        src = KernelSource(model, kernel)
        if src.member_value(PDL) is not None and src.template_param(PDL):
            return draft.extend(pdl_param())  # written already
        if src.taken(PDL):
            self.refuse(f"{PDL} is already a template parameter or tuning-struct member of {kernel.name}")
        if _ALREADY.search(src.text(src.body)):
            self.refuse("the kernel synchronises on its grid dependency already (griddepcontrol in its body)")
        rewrite = KernelRewrite(src, self.name)
        rewrite.member(PDL, False, _COMMENT, in_kernel=True, type_="bool")
        rewrite.insert(kernel.body_span.start_byte + 1, prologue(src.body_indent(), guard=PDL))
        return draft.extend(pdl_param(), text=rewrite.result())
