"""Structural variants of a kernel: the model, the built-in transforms that produce them, and the
combined template that holds them all behind `VARIANT`."""

from cutune.template.variants.block_items import BlockItems
from cutune.template.variants.combine import VARIANT, variant_launch, with_variants
from cutune.template.variants.flat_rows import FlatRows
from cutune.template.variants.grid_shape import GridShape
from cutune.template.variants.group_items import GroupItems
from cutune.template.variants.model import Launch, Provenance, Transform, Variant
from cutune.template.variants.online import OnlineMerge
from cutune.template.variants.packs import PacksPerThread
from cutune.template.variants.propose import Combined, combine, combine_all, propose_variants
from cutune.template.variants.prune import keep_variant, winning_variant
from cutune.template.variants.row_cache import RowCache
from cutune.template.variants.row_reduce import RowReduce
from cutune.template.variants.split import SplitItems
from cutune.template.variants.thread_packs import ThreadPacks
from cutune.template.variants.vectorize import Vectorize

# in the order they are tried (and numbered as VARIANT = 1, 2, ... when all apply)
TRANSFORMS: dict[str, Transform] = {
    t.name: t
    for t in (
        Vectorize(),
        PacksPerThread(),
        GridShape(),
        RowReduce(),
        SplitItems(),
        BlockItems(),
        GroupItems(),
        OnlineMerge(),
        FlatRows(),
        ThreadPacks(),
        RowCache(),
    )
}

__all__ = [
    "TRANSFORMS",
    "VARIANT",
    "BlockItems",
    "Combined",
    "FlatRows",
    "GridShape",
    "GroupItems",
    "Launch",
    "OnlineMerge",
    "PacksPerThread",
    "Provenance",
    "RowCache",
    "RowReduce",
    "SplitItems",
    "ThreadPacks",
    "Transform",
    "Variant",
    "Vectorize",
    "combine",
    "combine_all",
    "keep_variant",
    "propose_variants",
    "variant_launch",
    "winning_variant",
    "with_variants",
]
