"""thread_count: a loop that steps by a compile-time thread count (`col += block_size`, `i += kNumThreads`) read as
stepping by `blockDim.x`, where every launch of the kernel in the file launches exactly that many threads.

The count is a template parameter of the kernel (its value the launch's template argument) or a `constexpr`
local with a literal value; the launch's block is an expression or a `dim3` whose x is the same text. Then
`blockDim.x` and the count are equal wherever the kernel runs, and the loops are the block-stride loops the
transforms read. Refused, with the reason, when a launch's block cannot be matched to the count.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource
from cutune.template.recipes.host import HostResolver, launch_config
from cutune.template.variants.canonical.guard import declarator_target
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.loops import written_names

NAME = "thread_count"


def block_size_strides(model: SourceModel, kernel: str) -> SourceModel | str | None:
    """The model with `kernel`'s thread-count steps written `blockDim.x`; why not; None when it has none."""
    body = kernel_body(model, kernel)
    stepped = set(re.findall(r"\+=\s*([A-Za-z_]\w*)\s*\)", body))
    if not stepped & {p.name for p in model.kernel(kernel).template_params} and "constexpr" not in body:
        return None
    src = KernelSource(model, model.kernel(kernel))
    counts = compile_time_counts(src)
    steps = []
    for loop in src.in_body("for_statement"):
        update = loop.child_by_field_name("update")
        if update is not None and update.type == "assignment_expression" and src.field(update, "operator") == "+=":
            right = update.child_by_field_name("right")
            if right is not None and src.text(right).strip() in counts:
                steps.append(right)
    if not steps:
        return None
    names = {src.text(s).strip() for s in steps}
    launches = src.launches()
    if not launches:
        return f"steps by {sorted(names)[0]}, and no launch of {kernel} in this file says how many threads it runs"
    for site, call in launches:
        config = launch_config(call)
        if len(config) < 2:
            return f"the launch at line {src.line(call)} has no block to compare with {sorted(names)[0]}"
        block = config[1]
        dims = HostResolver(src, call).dims_of(block)
        x = src.text(dims[1][0]) if dims is not None and dims[1] else src.text(block)
        for name in names:
            value = counts[name](site.template_args)
            if value is None or "".join(value.split()) != "".join(x.split()):
                return (
                    f"steps by {name}, but the launch at line {src.line(call)} runs `{x}` threads per block "
                    f"where {name} is `{value}`"
                )
    edits = EditList(src.data)
    for s in steps:
        edits.replace(s.start_byte, s.end_byte, "blockDim.x")
    return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)


Count = Callable[[tuple[str, ...]], str | None]


def compile_time_counts(src: KernelSource) -> dict[str, Count]:
    """Name → a function of a launch's template arguments giving the count's value there (None: unknown)."""
    counts: dict[str, Count] = {}
    for k, p in enumerate(src.kernel.template_params):
        if p.type.strip() in ("int", "unsigned", "unsigned int", "size_t", "uint32_t", "int32_t"):
            counts[p.name] = functools.partial(_argument, k, p.default)
    written = written_names(src, src.body)
    for d in src.in_body("declaration"):
        target = declarator_target(d)
        value = re.fullmatch(r"[^=]*\bconstexpr\b[^=]*=\s*(\d+)\s*;", src.text(d))
        if target is not None and value is not None and src.text(target) not in written:
            counts[src.text(target)] = functools.partial(_literal, value.group(1))
    return counts


def _argument(position: int, default: str | None, args: tuple[str, ...]) -> str | None:
    """A template parameter's value at a launch: its argument there, else its default."""
    return args[position] if position < len(args) else default


def _literal(value: str, args: tuple[str, ...]) -> str | None:
    """A constexpr local's value, the same at every launch."""
    return value
