"""chain: a transform applied to a variant's body, so one kernel can have several structural changes at once
(split over SPLIT blocks per item, and vectorised): a variant whose parent is another variant.

The parent's body (and helpers) are written into the kernel, the file is parsed again and the transform
runs on it as on any kernel; the result keeps both sets of parameters, and its launch is the child's
with `{grid}`, `{block}` and `{shared_mem}` standing for the parent's launch.
"""

from __future__ import annotations

import re

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.errors import TransformRefused
from cutune.spec import KernelSpec
from cutune.template.edits import EditList, apply_edits
from cutune.template.variants.combine import PLACEHOLDER
from cutune.template.variants.model import Launch, Provenance, Transform, Variant, joined_helpers


def chain(parent: Variant, transform: Transform, model: SourceModel, kernel: str, spec: KernelSpec | None) -> Variant:
    """`transform` applied to `parent`'s body of `kernel` (in `model`, the file the parent was written
    against); TransformRefused when it refuses there, or when the two name a parameter alike."""
    k = model.kernel(kernel)
    data = model.text.encode("utf-8")
    edits = EditList(data)
    if parent.helpers.strip():
        edits.insert(k.span.start_byte, parent.helpers.strip() + "\n\n")
    edits.replace(k.body_span.start_byte + 1, k.body_span.end_byte - 1, "\n" + parent.body + "\n")
    child = transform.apply(parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True), kernel, spec)
    clash = {p.name for p in parent.params} & {p.name for p in child.params}
    if clash:
        raise TransformRefused(transform.name, f"on {parent.name}: both name a parameter {sorted(clash)[0]}")
    helpers = joined_helpers(parent.helpers, child.helpers)
    return Variant(
        name=f"{parent.name}_{child.name}",
        body=child.body,
        params=(*parent.params, *child.params),
        constraints=(*(dict(child.lifts).get(c, c) for c in parent.constraints), *child.constraints),
        launch=composed(parent.launch, child.launch),
        helpers=helpers,
        provenance=Provenance(transform.name, parent=parent.name, note=child.provenance.note),
        instantiation=parent.instantiation,  # the parent's body for other instantiations is the original's
    )


def explicit(expr: str, dim: int) -> str:
    """`expr` with its bare `{grid}` and `{block}` naming dimension `dim` outright (`{grid.y}`)."""
    return PLACEHOLDER.sub(
        lambda m: m.group(0) if m.group(2) or m.group(1) == "shared_mem" else f"{{{m.group(1)}.{'xyz'[dim]}}}", expr
    )


def composed(parent: Launch | None, child: Launch | None) -> Launch | None:
    """The child's launch with its placeholders standing for the parent's launch (same dimension); a
    dimension only the parent sets stays the parent's; either alone when the other keeps the spec's."""
    if parent is None or child is None:
        return child or parent
    outer = {"grid": parent.grid, "block": parent.block}

    def sub(expr: str, dim: int) -> str:
        def one(m: re.Match[str]) -> str:
            if m.group(1) == "shared_mem":
                return f"({parent.shared_mem})"
            at = "xyz".index(m.group(2)) if m.group(2) else dim
            mine = outer[m.group(1)]
            # the parent's own placeholders name its dimension outright: the child may read it in another one
            if at >= len(mine):
                return m.group(0)
            return f"({mine[at] if at == dim else explicit(mine[at], at)})"

        return PLACEHOLDER.sub(one, expr)

    def over(mine: tuple[str, ...], theirs: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sub(mine[i], i) if i < len(mine) else theirs[i] for i in range(max(len(mine), len(theirs))))

    return Launch(
        grid=over(child.grid, parent.grid), block=over(child.block, parent.block), shared_mem=sub(child.shared_mem, 0)
    )
