"""grid_shape: a grid-stride kernel launched on a persistent grid of BLOCKS_PER_SM blocks per SM (never
more blocks than the original launch), so each block loops over many chunks instead of the grid
covering the work once.

A grid-stride loop covers its range with any grid, so the body stays as it is; the transform refuses when
the kernel reads the block index or grid size anywhere else (the grid then carries meaning), when a loop's
iterations cannot move between threads (a thread's random state, an early exit: another grid gives another thread
each index), and for one-block-per-item kernels, whose item count only the launch knows.
"""

from __future__ import annotations

from cutune.cuda.model import SourceModel
from cutune.errors import TransformRefused
from cutune.spec import KernelSpec
from cutune.template.model import Binding, TunableParam
from cutune.template.variants.loops import grid_blocker, grid_loops_x, kernel_source
from cutune.template.variants.model import Launch, Provenance, Transform, Variant

NAME = "persistent_grid"


class GridShape(Transform):
    name = "grid_shape"

    def apply(self, model: SourceModel, kernel: str, spec: KernelSpec | None) -> Variant:
        src = kernel_source(self.name, model, kernel)
        grid_loops = grid_loops_x(src)
        if not grid_loops:
            uses = [n for n in src.in_body("identifier") if src.text(n) == "blockIdx"]
            what = (
                f"the block index is the work item (line {src.line(uses[0])}) and only the launch knows how many "
                "items there are"
                if uses
                else "no grid-stride loop and no block index"
            )
            raise TransformRefused(self.name, f"{what}: the grid cannot change shape without changing the result")
        blocker = grid_blocker(src)
        if blocker is not None:
            raise TransformRefused(self.name, blocker)
        data = src.data
        inner = data[src.kernel.body_span.start_byte + 1 : src.kernel.body_span.end_byte - 1].decode()
        return Variant(
            name=NAME,
            body=inner,
            params=(
                TunableParam(
                    "BLOCKS_PER_SM", (1, 2, 4, 8, 16, 32), 4, Binding.LAUNCH, description="persistent blocks per SM"
                ),
            ),
            launch=Launch(grid=("max(1, min({grid}, BLOCKS_PER_SM * sm_count))",), block=("{block}",)),
            provenance=Provenance(self.name, note="a persistent grid of BLOCKS_PER_SM × SMs blocks"),
        )
