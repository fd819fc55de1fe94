"""The templatize recipes, in the order templatize runs them (later ones build on earlier ones)."""

from __future__ import annotations

from cutune.template.recipes.base import Draft, Recipe
from cutune.template.recipes.block_threads import BlockThreads
from cutune.template.recipes.compile_flags import CompileFlags
from cutune.template.recipes.grid_size import GridSize
from cutune.template.recipes.index_bits import IndexBits
from cutune.template.recipes.items_per_thread import ItemsPerThread
from cutune.template.recipes.launch_bounds import LaunchBounds
from cutune.template.recipes.specialize import Specialize
from cutune.template.recipes.unroll import Unroll
from cutune.template.recipes.vector_width import VectorWidth

RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        BlockThreads(),
        GridSize(),
        LaunchBounds(),
        Unroll(),
        ItemsPerThread(),
        Specialize(),
        IndexBits(),
        VectorWidth(),
        CompileFlags(),
    )
}

__all__ = ["RECIPES", "Draft", "Recipe"]
