"""vector_width: finds `16 / sizeof(T)` pack widths; reports why they are not tuned (yet)."""

from __future__ import annotations

from cutune.cuda.model import Kernel, LiteralKind, SourceModel
from cutune.template.recipes.base import Draft, KernelSource, Recipe

# built-in CUDA vector types a kernel loads packs through, with their sizes in bytes
PACK_TYPES = {
    "uint4": 16,
    "int4": 16,
    "float4": 16,
    "double2": 16,
    "longlong2": 16,
    "ulonglong2": 16,
    "uint2": 8,
    "int2": 8,
    "float2": 8,
}


# The literals templatize finds but never makes parameters, and what changes them instead: said once for every
# front end (hints, `kernels`). The recipe below finds pack widths and always refuses, with the kernel's reason.
NOT_TUNED = {
    LiteralKind.VECTOR_WIDTH: "not a parameter templatize tunes: a structural variant changes it (a code action; "
    "`cutune tune` searches the variants)",
}


class VectorWidth(Recipe):
    name = "vector_width"
    description = "the elements per packed load (`16 / sizeof(T)`); detected and explained, not tuned yet"

    def apply(self, model: SourceModel, kernel: Kernel, draft: Draft) -> Draft:
        widths = [
            lit
            for lit in model.literals_of(kernel.name)
            if lit.kind is LiteralKind.VECTOR_WIDTH
            and kernel.span.start_byte <= lit.span.start_byte < kernel.span.end_byte
        ]
        if not widths:
            self.refuse("no `16 / sizeof(T)` pack width in the kernel")
        src = KernelSource(model, kernel)
        pack = next((src.text(t) for t in src.in_body("type_identifier") if src.text(t) in PACK_TYPES), None)
        if pack is not None:
            self.refuse(
                f"loads are {pack} ({PACK_TYPES[pack]} bytes) — changing the pack width needs a different load type"
            )
        self.refuse(
            f"the pack width at line {widths[0].span.start.line + 1} feeds no load type cutune knows; "
            "tuning it is not supported yet"
        )
