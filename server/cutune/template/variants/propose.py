"""propose_variants: every registered transform tried on one kernel; variants where they apply, refusals
(with each transform's stated reason) where they do not; and the other transforms chained onto the
variants of chainable ones (split over blocks, then vectorised), each chained variant standing in for the
plain one it extends (at the parent's defaults it is that one)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cutune.cuda.model import SourceModel, TemplateParamKind
from cutune.cuda.parse import parse_source
from cutune.cuda.syntax import device_view_spans
from cutune.errors import CutuneError, TransformRefused
from cutune.spec import KernelSpec
from cutune.template.model import Refusal, Template
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.canonical import canonicalise
from cutune.template.variants.canonical.template_args import fold_template_args, literal_value, specialised
from cutune.template.variants.chain import chain
from cutune.template.variants.combine import with_variants
from cutune.template.variants.loops import declared_names
from cutune.template.variants.model import Transform, Variant


@dataclass(frozen=True)
class Combined:
    """A template with the transforms' variants behind VARIANT, the spec that launches them, and why the
    other transforms refused."""

    template: Template
    model: SourceModel  # the combined template, parsed
    spec: KernelSpec | None
    variants: tuple[Variant, ...]
    refusals: tuple[Refusal, ...]


def combine_all(model: SourceModel, kernel: str, base: Template, spec: KernelSpec | None) -> Combined:
    """Every transform tried on the recipes' template `base` (parsed as `model`), the variants combined
    with it; the template itself where no transform applies."""
    variants, refusals = propose_variants(model, kernel, spec)
    return combine(model, kernel, base, spec, variants, refusals)


def combine(
    model: SourceModel,
    kernel: str,
    base: Template,
    spec: KernelSpec | None,
    variants: Sequence[Variant],
    refusals: Sequence[Refusal] = (),
) -> Combined:
    """`variants` combined with the recipes' template `base` (parsed as `model`), numbered in their order."""
    template, combined_spec = with_variants(model, kernel, variants, spec, base=base)
    parsed = model if template.source == model.text else parse_source(template.source, model.path, rewrite=True)
    return Combined(template, parsed, combined_spec, tuple(variants), tuple(refusals))


_EFFECTS = ("call_expression", "assignment_expression", "update_expression")


@dataclass(frozen=True)
class _LeftOut:
    """What a kernel's parse left out where it was read as a device pass's view (its preprocessor conditionals split
    its braces; see cutune.cuda.conditionals): the lines (number, text) of the directives and branches not taken,
    and, where they form a guard around the whole body (`#if ... if constexpr (...) { return; } else { #endif` ...
    `#if ... } #endif`: all of them before the first statement but declarations computing values, or after the
    last), the guard's text on either side."""

    lines: tuple[tuple[int, str], ...] = ()
    around: tuple[str, str] | None = None  # (before the first statement, after the last)

    def kept_by(self, body: str) -> tuple[str, str]:
        """`body` keeping every line left out, wrapped in the text around the original's statements where it
        dropped them, and ''; else `body` and why it cannot stand for the original."""
        dropped = self._dropped(body)
        if dropped and self.around is not None and not self._dropped(wrapped := self.around[0] + body + self.around[1]):
            return wrapped, ""
        return body, dropped

    def _dropped(self, body: str) -> str:
        kept = {line.strip() for line in body.splitlines()} if self.lines else set()
        for number, line in self.lines:
            if line not in kept:
                return (
                    f"drops `{line}` (line {number}), a preprocessor branch the kernel was read without: the "
                    "rewrite would run one architecture's code on all"
                )
        return ""


def _left_out(model: SourceModel, kernel: str) -> _LeftOut:
    """What `kernel`'s parse left out (nothing where it was read as written)."""
    data = model.text.encode("utf-8")
    spans = device_view_spans(data)
    if not spans:
        return _LeftOut()
    span = model.kernel(kernel).body_span
    start, end = span.start_byte + 1, span.end_byte - 1
    inside = [(a, b) for a, b in spans if start <= a < end]
    lines = tuple(
        (data.count(b"\n", 0, a) + 1 + n, line.strip())
        for a, b in inside
        for n, line in enumerate(data[a:b].decode("utf-8", errors="replace").splitlines())
        if line.strip()
    )
    try:
        src = KernelSource(model, model.kernel(kernel))
    except CutuneError:  # a definition the transforms cannot read either: they say so themselves
        return _LeftOut(lines)
    statements = src.body.named_children
    if not inside or not statements:
        return _LeftOut(lines)
    # the guard opens after the body's first declarations at most (templatize puts its own there): computing
    # nothing but values the guard does not read, they may as well follow it
    guard = inside[0][0]
    before = [t for t in statements if t.end_byte <= guard]
    after = next((t.start_byte for t in statements if t.start_byte > guard), None)
    pure = all(t.type == "comment" or (t.type == "declaration" and not descendants(t, *_EFFECTS)) for t in before)
    guard_words = {w for a, b in inside for w in re.findall(rb"[A-Za-z_]\w*", data[a:b])}
    pure = pure and not guard_words & {name.encode() for t in before for name in declared_names(src, t)}
    last = statements[-1].end_byte
    if after is None or not pure or not all(b <= after or a >= last for a, b in inside):
        return _LeftOut(lines)
    return _LeftOut(
        lines, (data[guard:after].decode("utf-8", errors="replace"), data[last:end].decode("utf-8", errors="replace"))
    )


def propose_variants(
    model: SourceModel,
    kernel: str,
    spec: KernelSpec | None,
    *,
    transforms: dict[str, Transform] | None = None,
    include_dirs: Sequence[str] = (),
) -> tuple[list[Variant], list[Refusal]]:
    """The variants the transforms (all registered ones, or those given) make of `kernel`, and why the
    others refused; two transforms that produce the same body keep the first. Headers are looked up beside the
    file, then in `include_dirs` and the spec's."""
    from cutune.template.variants import TRANSFORMS

    original = model.kernel(kernel)  # raises SourceError naming the kernels when absent
    canonical = canonicalise(
        model,
        kernel,
        (*include_dirs, *(spec.include_dirs if spec is not None else ())),
        spec.template_args if spec is not None else None,
    )
    source = model
    model = canonical.model  # the transforms read the canonical forms; their bodies fit the original kernel
    variants: list[Variant] = []
    refusals: list[Refusal] = [Refusal(f"canonical {step}", reason) for step, reason in canonical.refusals]
    chosen = transforms if transforms is not None else TRANSFORMS
    left_out = _left_out(model, kernel)
    for name, transform in chosen.items():
        try:
            variant = transform.apply(model, kernel, spec)
        except TransformRefused as e:
            refusals.append(Refusal(e.transform, e.reason))
            continue
        body, dropped = left_out.kept_by(variant.body)
        variant = dataclasses.replace(variant, body=body)
        if dropped:
            refusals.append(Refusal(name, dropped))
            continue
        twin = next((v for v in variants if v.body == variant.body and v.launch == variant.launch), None)
        if twin is not None:
            refusals.append(Refusal(name, f"gives the same kernel as {twin.name}"))
            continue
        variants.append(variant)
    named = {name for t in chosen.values() if isinstance(t.chains_onto, frozenset) for name in t.chains_onto}
    for parent in [
        v
        for v in variants
        if getattr(chosen.get(v.provenance.origin), "chainable", False) or v.provenance.origin in named
    ]:
        origin = parent.provenance.origin
        neutral = getattr(chosen.get(origin), "chainable", False)
        # on a parent that is not the original at its defaults, only the transforms that name it
        tried = [
            t
            for t in chosen.values()
            if not t.chainable and t.chains_onto_variant(origin) and (neutral or isinstance(t.chains_onto, frozenset))
        ]
        for transform in tried:
            try:
                chained = chain(parent, transform, model, kernel, spec)
            except TransformRefused as e:
                refusals.append(Refusal(e.transform, f"on {parent.name}: {e.reason}"))
                continue
            body, dropped = left_out.kept_by(chained.body)
            chained = dataclasses.replace(chained, body=body)
            if dropped:
                refusals.append(Refusal(transform.name, f"on {parent.name}: {dropped}"))
                continue
            plain = [
                i for i, v in enumerate(variants) if v.provenance.origin == transform.name and not v.provenance.parent
            ]
            if plain and neutral:  # at the parent's defaults the chained variant is the plain one: keep one of them
                variants[plain[0]] = chained
            else:
                variants.insert(variants.index(parent), chained)
    body = source.text[original.body_span.start_byte + 1 : original.body_span.end_byte - 1].strip("\n")
    if canonical.instantiation:  # read at the spec's instantiation: every other one runs the original body
        variants = [specialised(v, canonical.instantiation, body) for v in variants]
    elif spec is None:  # no spec: where a transform refused, read at the instantiation the file's launch runs
        variants, refusals = _at_launched_instantiation(source, kernel, include_dirs, chosen, variants, refusals, body)
    if canonical.applied:  # say what the transforms read: the lines their notes name are the canonical form's
        seen = f"canonical form: {', '.join(canonical.applied)}; lines counted in it"
        variants = [
            dataclasses.replace(v, provenance=dataclasses.replace(v.provenance, note=f"{v.provenance.note} [{seen}]"))
            for v in variants
        ]
    return variants, refusals


def _at_launched_instantiation(
    source: SourceModel,
    kernel: str,
    include_dirs: Sequence[str],
    chosen: dict[str, Transform],
    variants: list[Variant],
    refusals: list[Refusal],
    body: str,
) -> tuple[list[Variant], list[Refusal]]:
    """`variants` and `refusals` with each transform that refused the kernel as written tried again at the
    instantiation of the file's first launch that writes out its value template arguments, every one a literal
    (llama.cpp's `soft_max_f32<true, 0, 0>`: 0 marks a length read at run time), read as a spec's is (template_args);
    what applies there is kept for that instantiation only (`specialised`), its refusal dropped. Only arguments the
    launch writes count: a parameter it leaves to its default (the tuning's own, `D_CT = 0`) is not read at it."""
    params = source.kernel(kernel).template_params
    args: dict[str, str] | None = None
    for site in source.launches_of(kernel):
        given = {
            p.name: a for p, a in zip(params, site.template_args, strict=False) if p.kind is TemplateParamKind.VALUE
        }
        if given and all(literal_value(v) is not None for v in given.values()):
            args = given
            break
    refused = {r.recipe for r in refusals if r.recipe in chosen} - {v.provenance.origin for v in variants}
    # read there only where the instantiation folds something: else it is the kernel as already read
    if args is None or not refused or fold_template_args(source, kernel, args) is None:
        return variants, refusals
    at = canonicalise(source, kernel, include_dirs, args)
    if not at.instantiation:  # the fold did not stand (the kernel read there no longer parses): nothing read at it
        return variants, refusals
    found: list[Variant] = []
    for name, transform in chosen.items():
        if name not in refused:
            continue
        try:
            variant = transform.apply(at.model, kernel, None)
        except TransformRefused:
            continue
        if any(v.name == variant.name for v in variants):
            continue
        where = ", ".join(f"{n} = {v}" for n, v in at.instantiation)
        note = f"at the file's launch of {where}: {variant.provenance.note}"
        variant = dataclasses.replace(variant, provenance=dataclasses.replace(variant.provenance, note=note))
        found.append(specialised(variant, at.instantiation, body))
    kept = {v.provenance.origin for v in found}
    return [*variants, *found], [r for r in refusals if r.recipe not in kept]
