"""ldg_reads: `__ldg(&a[i])`, an element read through the read-only data cache, written as the read `a[i]` it is, so
the transforms that load a row's elements themselves (row_reduce's packs held in registers) see an element read, not
an address taken: rewritten under `&`, such a read would hand `__ldg` a register's address, which faults.

`__ldg` returns the value at its address, and is defined only for memory nothing writes while the kernel runs, where
a plain read returns that same value.
"""

from __future__ import annotations

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource
from cutune.template.variants.canonical.shape import kernel_body

NAME = "ldg_reads"


def plain_ldg_reads(model: SourceModel, kernel: str) -> SourceModel | None:
    """The model with `kernel`'s `__ldg(&a[i])` written `a[i]`; None when it has none."""
    if "__ldg" not in kernel_body(model, kernel):
        return None
    src = KernelSource(model, model.kernel(kernel))
    edits = EditList(src.data)
    done: list[tuple[int, int]] = []
    for call in src.in_body("call_expression"):
        if src.field(call, "function").strip() != "__ldg" or any(a <= call.start_byte < b for a, b in done):
            continue
        arguments = call.child_by_field_name("arguments")
        args = [a for a in arguments.named_children if a.type != "comment"] if arguments is not None else []
        address = args[0] if len(args) == 1 and args[0].type == "pointer_expression" else None
        target = address.child_by_field_name("argument") if address is not None else None
        if address is None or src.field(address, "operator") != "&" or target is None:
            continue
        if target.type != "subscript_expression":
            continue
        edits.replace(call.start_byte, call.end_byte, src.text(target))
        done.append((call.start_byte, call.end_byte))
    if not edits.edits:
        return None
    return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)
