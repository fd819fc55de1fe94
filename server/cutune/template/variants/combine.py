"""with_variants: the original body and every variant's body in one kernel, chosen by `VARIANT`.

The kernel keeps its name and parameter list; its body becomes `if constexpr (VARIANT == 0) {original}
else if constexpr (VARIANT == 1) {first variant} ...`, so an instantiation compiles only the branch it
selects (a variant's shared memory, helpers and loads cost nothing elsewhere). `VARIANT` and each
variant's TEMPLATE parameters become members of the kernel's tuning struct and template parameters that
default to them: at the defaults the file behaves exactly as the original.

The spec's launch becomes `a if VARIANT == 1 else (b if VARIANT == 2 else original)`. A variant's launch
expressions may write `{grid}`, `{block}` and `{shared_mem}` for the spec's own (same dimension), and `{grid.x}`,
`{block.y}`, ... for one dimension of it named outright.

Constraints keep the search free of duplicates: a variant's parameters are pinned to their defaults
whenever another variant runs (a parameter several variants share, as a chained variant shares its
parent's, is free while any of them runs), and a parameter of the base template (the recipes') that a variant's code
and launch never mention is pinned to its default while that variant runs.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from cutune.cuda.model import SourceModel
from cutune.errors import CutuneError
from cutune.spec import KernelSpec
from cutune.template.model import Binding, Space, Template, TunableParam
from cutune.template.recipes.base import KernelRewrite, KernelSource
from cutune.template.recipes.specialize import static_param
from cutune.template.tuning import value_text
from cutune.template.variants.loops import balanced, line_indent
from cutune.template.variants.model import Variant, joined_helpers

VARIANT = "VARIANT"
PLACEHOLDER = re.compile(r"\{(grid|block|shared_mem)(?:\.([xyz]))?\}")
_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")


def with_variants(
    model: SourceModel,
    kernel: str,
    variants: Sequence[Variant],
    spec: KernelSpec | None,
    *,
    base: Template | None = None,
) -> tuple[Template, KernelSpec | None]:
    """One kernel holding the original body (VARIANT = 0) and each variant's (VARIANT = k), with the space
    and the variant-aware spec launch. `model` is the file the variant bodies were written against (the
    recipes' template, `base`, when composing with it); `base`'s space and recipes are carried over."""
    k = model.kernel(kernel)
    base_space = _base_space(base, spec)
    if not variants:
        return base or Template(kernel, model.text, base_space), spec
    src = KernelSource(model, k)
    if src.taken(VARIANT):
        raise CutuneError(f"{kernel} already has a {VARIANT} parameter: it holds variants already")
    variants = _one_binding(variants)
    _check_names(variants, base_space, src)
    rewrite = KernelRewrite(src, "variants")
    rewrite.member(VARIANT, 0, "0 = the original body; k = the k-th structural variant", in_kernel=True)
    own = _own_params(variants)
    for p in own:
        if p.binding is Binding.TEMPLATE:
            rewrite.member(p.name, p.default, p.description or p.name, in_kernel=True)
    helpers = joined_helpers(*(v.helpers for v in variants))
    if helpers:
        rewrite.insert(k.span.start_byte, helpers + "\n\n")
    open_brace, close_brace = k.body_span.start_byte, k.body_span.end_byte - 1
    original = src.data[open_brace + 1 : close_brace].decode("utf-8")
    indent = line_indent(src.data, k.span.start_byte)
    rewrite.replace(open_brace + 1, close_brace, _branches(original, variants, indent))
    source = rewrite.result()
    variant_param = TunableParam(
        VARIANT,
        tuple(range(len(variants) + 1)),
        0,
        Binding.TEMPLATE,
        description="0 = original; " + "; ".join(f"{i} = {v.name}" for i, v in enumerate(variants, 1)),
    )
    params = (*base_space.params, variant_param, *own)
    constraints = (*base_space.constraints, *_pins(variants, base_space, spec), *_own_constraints(variants))
    constraints = tuple(dict.fromkeys(constraints))
    template = Template(
        kernel=kernel,
        source=source,
        space=Space(params, constraints),
        applied=(*(base.applied if base else ()), *(f"variant:{v.name}" for v in variants)),
        refused=base.refused if base else (),
    )
    return template, _spec_with(spec, variants, template.space) if spec is not None else None


def _base_space(base: Template | None, spec: KernelSpec | None) -> Space:
    """What is searched without variants: the spec's space when it lists parameters, else the template's."""
    if spec is not None and spec.space is not None and spec.space.params:
        return spec.space
    return base.space if base is not None else Space(())


def variant_launch(spec: KernelSpec, variants: Sequence[Variant]) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """The spec's grid, block and shared memory as expressions that pick each variant's launch."""
    launches = [v.launch for v in variants]
    grid_dims = max([len(spec.grid), *(len(x.grid) for x in launches if x is not None)])
    block_dims = max([len(spec.block), *(len(x.block) for x in launches if x is not None)])
    # a dimension a variant's launch does not name is the spec's (a batch or channel axis of the grid, blockIdx.y
    # and .z, beside a loop over x whose threads per block the variant divides)
    grid = tuple(
        _choose(spec, [x.grid[i] if x and i < len(x.grid) else None for x in launches], _dim(spec.grid, i), i)
        for i in range(grid_dims)
    )
    block = tuple(
        _choose(spec, [x.block[i] if x and i < len(x.block) else None for x in launches], _dim(spec.block, i), i)
        for i in range(block_dims)
    )
    shared = _choose(spec, [x.shared_mem if x else None for x in launches], spec.shared_mem)
    return grid, block, shared


def _dim(exprs: tuple[str, ...], i: int) -> str:
    return exprs[i] if i < len(exprs) else "1"


def _choose(spec: KernelSpec, picks: Sequence[str | None], original: str, dim: int = 0) -> str:
    """`e_k if VARIANT == k else (...)` over the variants whose launch (`picks`, None: the spec's) differs."""
    text = original
    for i in range(len(picks), 0, -1):
        mine = picks[i - 1]
        if mine is None:
            continue
        mine = _expand(mine, spec, dim)
        if _bare(mine) != _bare(original):
            text = f"({mine}) if {VARIANT} == {i} else ({text})"
    return text


def _bare(expr: str) -> str:
    """An expression without whitespace or redundant outer parentheses (for comparing launches)."""
    text = "".join(expr.split())
    while text.startswith("(") and text.endswith(")") and balanced(text[1:-1]):
        text = text[1:-1]
    return text


def _expand(expr: str, spec: KernelSpec, dim: int = 0) -> str:
    """A variant's launch expression with `{grid}`, `{block}`, `{shared_mem}` replaced by the spec's own
    (of dimension `dim`, or of the one a `{grid.x}` names)."""

    def own(m: re.Match[str]) -> str:
        at = "xyz".index(m.group(2)) if m.group(2) else dim
        dims = {"grid": spec.grid, "block": spec.block}.get(m.group(1))
        return f"({spec.shared_mem if dims is None else _dim(dims, at)})"

    return PLACEHOLDER.sub(own, expr)


def _spec_with(spec: KernelSpec, variants: Sequence[Variant], space: Space) -> KernelSpec:
    grid, block, shared = variant_launch(spec, variants)
    narrowed = spec.space is not None and bool(spec.space.params)
    return dataclasses.replace(
        spec,
        grid=grid,
        block=block,
        shared_mem=shared,
        space=space if narrowed else spec.space,
        constraints=tuple(dict.fromkeys((*spec.constraints, *space.constraints))),
    )


def _own_constraints(variants: Sequence[Variant]) -> list[str]:
    """Each variant's own constraints, binding only where it runs (VARIANT == its number)."""
    return [f"{VARIANT} != {i} or ({c})" for i, v in enumerate(variants, 1) for c in v.constraints]


def _pins(variants: Sequence[Variant], base: Space, spec: KernelSpec | None) -> list[str]:
    """Constraints that pin parameters meaningless for the running variant to their defaults."""
    pins: list[str] = []
    for p in _own_params(variants):
        owners = [i for i, v in enumerate(variants, 1) if p in v.params]
        pins.append(" or ".join([*(f"{VARIANT} == {i}" for i in owners), f"{p.name} == {_literal(p)}"]))
    for i, v in enumerate(variants, 1):
        code = " ".join((v.body, v.helpers, *_launch_texts(v, spec)))
        for p in base.params:
            if p.binding is Binding.FLAG or p.binding is Binding.DEFINE:
                continue  # compile flags and defines reach every branch
            names = {p.name} | ({static_param(p.arg)} if p.binding is Binding.SPECIALIZE and p.arg else set())
            if not any(re.search(rf"\b{re.escape(n)}\b", code) for n in names):
                pins.append(f"{VARIANT} != {i} or {p.name} == {_literal(p)}")
    return pins


def _launch_texts(v: Variant, spec: KernelSpec | None) -> tuple[str, ...]:
    if v.launch is None:
        return (*spec.grid, *spec.block, spec.shared_mem) if spec is not None else ()
    texts = (*v.launch.grid, *v.launch.block, v.launch.shared_mem)
    return tuple(_expand(t, spec) for t in texts) if spec is not None else texts


def _own_params(variants: Sequence[Variant]) -> list[TunableParam]:
    """The variants' parameters, each once (in order of first use)."""
    return list(dict.fromkeys(p for v in variants for p in v.params))


def _one_binding(variants: Sequence[Variant]) -> list[Variant]:
    """`variants` with a parameter that two of them name alike, one as a launch value and one as a template argument
    (block_items' ITEMS_Y, alone and on a body with shared arrays), a template argument in both: one kernel has one
    parameter of a name, and a launch value read as a template argument is the same value."""
    template = {p.name: p for v in variants for p in v.params if p.binding is Binding.TEMPLATE}

    def bound(p: TunableParam) -> TunableParam:
        twin = template.get(p.name)
        same = twin is not None and (twin.values, twin.default) == (p.values, p.default)
        return twin if same and p.binding is Binding.LAUNCH and twin is not None else p

    return [dataclasses.replace(v, params=tuple(bound(p) for p in v.params)) for v in variants]


def _literal(p: TunableParam) -> str:
    if isinstance(p.default, bool):
        return "True" if p.default else "False"
    if isinstance(p.default, str):
        raise CutuneError(f"variant parameter {p.name} has a text value; variants take integer or bool parameters")
    return value_text(p.default)


def _check_names(variants: Sequence[Variant], base: Space, src: KernelSource) -> None:
    seen: dict[str, str] = {p.name: "the base template" for p in base.params}
    shared: dict[str, TunableParam] = {}
    names: set[str] = set()
    for v in variants:
        if not _IDENTIFIER.match(v.name) or v.name in names:
            raise CutuneError(f"variant name {v.name!r} is not a unique C identifier")
        names.add(v.name)
        for p in v.params:
            if shared.get(p.name) == p:
                continue  # the same parameter in another variant (a chained variant keeps its parent's)
            shared[p.name] = p
            if p.name in seen or p.name == VARIANT or src.taken(p.name):
                where = seen.get(p.name, src.kernel.name)
                raise CutuneError(f"variant {v.name}: parameter {p.name} is already a parameter of {where}")
            if p.binding not in (Binding.TEMPLATE, Binding.LAUNCH):
                raise CutuneError(f"variant {v.name}: parameter {p.name} must be TEMPLATE or LAUNCH bound")
            seen[p.name] = f"variant {v.name}"


def _branches(original: str, variants: Sequence[Variant], indent: str) -> str:
    """The new inner text of the kernel body: the if-constexpr chain over the bodies."""
    inner = indent + "  "
    out = [f"\n{inner}if constexpr ({VARIANT} == 0) {{  // the original body", reindent(original, inner + "  ")]
    for i, v in enumerate(variants, 1):
        note = f"{v.provenance.origin}" + (f": {v.provenance.note}" if v.provenance.note else "")
        out.append(f"{inner}}} else if constexpr ({VARIANT} == {i}) {{  // variant {v.name} ({note})")
        out.append(reindent(v.body, inner + "  "))
    out.append(f"{inner}}}\n{indent}")
    return "\n".join(out)


def reindent(body: str, indent: str) -> str:
    """`body`'s lines, blank edges dropped, its common indent replaced by `indent` (preprocessor lines stay)."""
    lines = body.strip("\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    common = min(
        (len(ln) - len(ln.lstrip()) for ln in lines if ln.strip() and not ln.lstrip().startswith("#")), default=0
    )
    return "\n".join(
        ln if ln.lstrip().startswith("#") else (indent + ln[common:] if ln.strip() else "") for ln in lines
    )
