"""keep_variant: the file with one variant written in as the kernel's only body — what apply writes when
one variant wins at every size (the other branches, and `VARIANT`, are code nobody would keep) — and, when
its launch differs from the original's, the host launches rewritten to launch it as it was measured (or
HostLaunchError, never a file that launches it with the original's grid and block)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from cutune.cuda.model import SourceModel
from cutune.template.model import Binding, Value
from cutune.template.recipes.base import KernelRewrite, KernelSource
from cutune.template.variants.combine import VARIANT, reindent
from cutune.template.variants.host_launch import HostLaunchError, config_edits, host_config, host_size_name
from cutune.template.variants.loops import line_indent
from cutune.template.variants.model import Variant


def keep_variant(model: SourceModel, kernel: str, variant: Variant, values: Mapping[str, Value]) -> str:
    """`model`'s text with `kernel`'s body replaced by `variant`'s, its helpers before the kernel, and its
    parameters as tuning-struct members at `values` (else their defaults). `model` is the file the
    variant was written against (the recipes' template, without `VARIANT`). HostLaunchError when the
    variant has a launch of its own that a launch site cannot be made to launch (the file would then run
    the variant with the wrong grid or block)."""
    k = model.kernel(kernel)
    src = KernelSource(model, k)
    rewrite = KernelRewrite(src, "variants")
    for p in variant.params:
        value = values.get(p.name, p.default)
        rewrite.member(p.name, value, p.description or variant.name, in_kernel=p.binding is Binding.TEMPLATE)
    indent = line_indent(src.data, k.span.start_byte)
    origin = variant.provenance.origin + (f": {variant.provenance.note}" if variant.provenance.note else "")
    lines = [f"{indent}// cutune: variant {variant.name} ({origin}), tuned"]
    if variant.launch is not None:
        launch = f"grid = {', '.join(variant.launch.grid)}; block = {', '.join(variant.launch.block)}"
        _rewrite_launches(src, rewrite, variant)
        lines.append(f"{indent}// cutune: its launches below use {launch} ({{grid}}/{{block}}: the original's)")
    if variant.helpers.strip():
        rewrite.insert(k.span.start_byte, variant.helpers.strip() + "\n\n" + indent)
    rewrite.insert(k.span.start_byte, "\n".join(lines).lstrip() + "\n" + indent)
    open_brace, close_brace = k.body_span.start_byte, k.body_span.end_byte - 1
    rewrite.replace(open_brace + 1, close_brace, "\n" + reindent(variant.body, indent + "  ") + "\n" + indent)
    return rewrite.result()


def _rewrite_launches(src: KernelSource, rewrite: KernelRewrite, variant: Variant) -> None:
    """Every launch of the kernel in this file with the variant's grid, block and shared memory, in the host's
    own terms (HostLaunchError when one cannot be written, and then none is)."""
    assert variant.launch is not None
    params = [p.name for p in variant.params]
    edits: list[tuple[int, int, str]] = []
    for site, call in src.launches():
        if site.macro is not None:
            raise HostLaunchError(f"the launch at line {src.line(call)} is inside the macro {site.macro}")
        config = host_config(
            variant.launch,
            site,
            params,
            functools.partial(src.ref, at=call.start_byte),
            functools.partial(host_size_name, src, site, call),
        )
        edits += config_edits(site, config)
    for start, end, text in edits:
        rewrite.replace(start, end, text)


def winning_variant(configs: Sequence[Mapping[str, Value]]) -> int | None:
    """The VARIANT every configuration launches, when they agree; None when they differ (or none is set)."""
    chosen = {c.get(VARIANT, 0) for c in configs}
    return int(next(iter(chosen))) if len(chosen) == 1 else None  # type: ignore[arg-type]
