"""launch_bounds: `__launch_bounds__(threads, min_blocks)` with min_blocks a parameter, and threads tied
to the block-size parameter when it is compile-time."""

from __future__ import annotations

import dataclasses

from cutune.cuda.model import Kernel, SourceModel
from cutune.cuda.syntax import int_value, split_arguments
from cutune.template.model import Binding, TunableParam
from cutune.template.recipes.base import Draft, KernelRewrite, KernelSource, Recipe

NAME = "MIN_BLOCKS"
CANDIDATES = (1, 2, 3, 4, 6, 8)
_COMMENT = "__launch_bounds__ minimum blocks per SM (caps the registers per thread; 0 = no minimum)"


class LaunchBounds(Recipe):
    name = "launch_bounds"
    description = "__launch_bounds__ minimum blocks per SM as a parameter, its thread count tied to the block size"

    def apply(self, model: SourceModel, kernel: Kernel, draft: Draft) -> Draft:
        src = KernelSource(model, kernel)
        block = draft.param(draft.block_threads) if draft.block_threads else None
        bounds = kernel.launch_bounds
        if bounds is None:
            if block is None or block.binding is not Binding.TEMPLATE:
                self.refuse(
                    "no __launch_bounds__ and no compile-time block size (the block size is only known at "
                    "the launch), so there is no thread count to bound"
                )
            return self._add_bounds(src, draft, block)
        if bounds.max_cluster is not None:
            self.refuse("__launch_bounds__ with a cluster size (3rd argument) is not supported yet")
        (t_start, t_end), *rest = split_arguments(src.data, bounds.span.start_byte, bounds.span.end_byte)
        min_text = bounds.min_blocks.strip() if bounds.min_blocks is not None else None
        recovered = src.member_int(min_text) if min_text is not None else None
        if min_text is not None and recovered is not None and src.template_param(min_text):
            return self._draft(draft, min_text, recovered, bounds.max_threads.strip())  # already written
        rewrite = KernelRewrite(src, self.name)
        threads = bounds.max_threads.strip()
        tie = block is not None and int_value(threads) is not None and int_value(threads) == block.default
        if tie and block is not None:
            if block.binding is Binding.LAUNCH:  # the kernel must now see the block size at compile time
                rewrite.template_param(f"int {block.name} = {src.struct_name}::{block.name}")
                block = dataclasses.replace(block, binding=Binding.TEMPLATE)
            rewrite.replace(t_start, t_end, block.name)
            threads = block.name
            draft = dataclasses.replace(
                draft,
                constraints=tuple(
                    c for c in draft.constraints if c != f"{block.name} <= {int_value(bounds.max_threads)}"
                ),
            ).extend(block)
        name = self._free_name(src)
        if min_text is None:
            default = 0  # no minimum, as written: `__launch_bounds__(N, 0)` compiles as `__launch_bounds__(N)`
            rewrite.insert(t_end, f", {name}")
        else:
            value = int_value(min_text)
            if value is None:
                self.refuse(f"the minimum blocks `{min_text}` of __launch_bounds__ is not a literal")
            default = value
            rewrite.replace(*rest[0], name)
        rewrite.member(name, default, _COMMENT, in_kernel=True)
        return self._draft(draft, name, default, threads, text=rewrite.result())

    def _add_bounds(self, src: KernelSource, draft: Draft, block: TunableParam) -> Draft:
        """`__launch_bounds__(BLOCK, MIN_BLOCKS)` on a kernel whose block size is a template parameter."""
        name = self._free_name(src)
        rewrite = KernelRewrite(src, self.name)
        rewrite.insert(src.kernel.name_span.start_byte, f"__launch_bounds__({block.name}, {name}) ")
        rewrite.member(name, 0, _COMMENT, in_kernel=True)
        return self._draft(draft, name, 0, block.name, text=rewrite.result())

    def _free_name(self, src: KernelSource) -> str:
        if src.taken(NAME):
            self.refuse(f"{NAME} is already a template parameter or tuning-struct member of {src.kernel.name}")
        return NAME

    def _draft(self, draft: Draft, name: str, default: int, threads: str, text: str | None = None) -> Draft:
        values = tuple(sorted(set(CANDIDATES) | {default}))
        param = TunableParam(name, values, default, Binding.TEMPLATE, description=_COMMENT)
        return draft.extend(param, constraints=(f"{threads} * {name} <= max_threads_per_sm",), text=text)
