"""Ragged sizes: problem sizes moved off the round numbers a spec lists, to check tails (never timed).

Serving sizes are round (4096, 14336, ...): a configuration whose vector path skips the tail, or is
right only for multiples of its tile, passes every one of them. For each spec size we derive a size
whose every variable is an odd multiple of the divisor the kernel relies on (`multiple_of`, default
1): n → the nearest such value below n. The smallest spec size also gets a variant off by twice the
divisor (an even but not round remainder, for kernels with several tail widths). A size that is too
large is first shrunk by halving its largest variables, so that checking it stays cheap; a derived
size that breaks a size-only constraint or gives an invalid shape is dropped.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from cutune.errors import ExpressionError, SpecError
from cutune.spec.model import KernelSpec
from cutune.template.dtypes import dtype_size
from cutune.template.expr import compile_expr

DEFAULT_CAP_BYTES = 64 * 1024 * 1024  # the most array memory one ragged size may take


@dataclass(frozen=True)
class RaggedSize:
    """A derived size: its values, the spec size it comes from, and the variables it moved."""

    size: dict[str, int]
    base: int  # index into spec.sizes
    moved: tuple[str, ...]

    def describe(self) -> str:
        """E.g. "num_tokens=15, d=4088 (from sizes[0])"."""
        values = ", ".join(f"{k}={v}" for k, v in self.size.items())
        return f"{values} (from sizes[{self.base}])"


def ragged_sizes(spec: KernelSpec, *, cap_bytes: int = DEFAULT_CAP_BYTES) -> tuple[RaggedSize, ...]:
    """The ragged sizes to check `spec`'s kernel at, besides its own sizes (deduplicated, in order); an
    allocation bound (`bound` arrays) stays as captured: it bounds the smaller size as well."""
    if not spec.sizes or not spec.ragged:
        return ()
    bound = spec.bound_names()
    seen = {_key(s) for s in spec.sizes}
    out: list[RaggedSize] = []
    smallest = min(range(len(spec.sizes)), key=lambda i: _bytes(spec, spec.sizes[i]) or 0)
    for index, base in enumerate(spec.sizes):
        small = _shrink(spec, base, cap_bytes, bound)
        if small is None:
            continue
        steps = (1, 2) if index == smallest else (1,)
        for step in steps:
            derived = {
                n: v if n in bound else _off_multiples(v, spec.multiple_of.get(n, 1), step) for n, v in small.items()
            }
            moved = tuple(name for name in derived if derived[name] != base[name])
            if not moved or _key(derived) in seen or not _valid(spec, derived, cap_bytes):
                continue
            seen.add(_key(derived))
            out.append(RaggedSize(derived, index, moved))
    return tuple(out)


def describe_checks(spec: KernelSpec, ragged: tuple[RaggedSize, ...]) -> str:
    """One line for reports: the ragged sizes checked and the divisibility the spec declares."""
    kept = ", ".join(f"{k} a multiple of {m}" for k, m in spec.multiple_of.items())
    note = f"; keeping {kept} (multiple_of in the spec)" if kept else ""
    if not ragged:
        return f"no ragged size could be derived within the constraints and memory cap{note}"
    return f"tails checked at {len(ragged)} ragged size(s): {'; '.join(r.describe() for r in ragged)}{note}"


def _off_multiples(value: int, multiple: int, step: int) -> int:
    """`value` as `multiple` × an odd count (step 1) or × 2 · odd (step 2): the nearest below, or as is."""
    count = value // multiple
    residue, modulus = (1, 2) if step == 1 else (2, 4)
    if count % modulus == residue:
        return value  # already off the round numbers
    want = count - 1
    want -= (want - residue) % modulus
    return want * multiple if want > 0 else value


def _shrink(spec: KernelSpec, base: Mapping[str, int], cap_bytes: int, fixed: Collection[str]) -> dict[str, int] | None:
    """`base` with its largest variables (not the `fixed`) halved, keeping their divisors, until its arrays fit
    the cap."""
    size = dict(base)
    while (total := _bytes(spec, size)) is not None and total > cap_bytes:
        candidates = [
            n for n in size if n not in fixed and size[n] // 2 >= spec.multiple_of.get(n, 1) and size[n] // 2 >= 1
        ]
        if not candidates:
            return None
        name = max(candidates, key=lambda n: size[n])
        multiple = spec.multiple_of.get(name, 1)
        size[name] = max(multiple, size[name] // 2 // multiple * multiple)
    return size if _bytes(spec, size) is not None else None


def _bytes(spec: KernelSpec, size: Mapping[str, int]) -> int | None:
    """Array memory at `size`, or None where a shape does not evaluate."""
    try:
        shapes = spec.array_shapes(size)
    except SpecError:
        return None
    return sum(math.prod(shapes[a.name]) * dtype_size(a.dtype) for a in spec.args if a.shape is not None)


def _valid(spec: KernelSpec, size: Mapping[str, int], cap_bytes: int) -> bool:
    """Shapes and scalars evaluate, memory fits, and every constraint over sizes alone holds."""
    total = _bytes(spec, size)
    if total is None or total > cap_bytes:
        return False
    try:
        spec.scalar_values(size)
        for text in spec.constraints:
            expr = compile_expr(text)
            if expr.names <= set(size) and not expr.evaluate(size):
                return False
    except (SpecError, ExpressionError):
        return False
    return True


def _key(size: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(size.items()))


PACK_BYTES = 16  # the widest vector load production kernels use (uint4, float4)


@dataclass(frozen=True)
class RaggedFailure:
    """The original failed at a ragged size cutune derived: where, how, and the divisors it evidently needs."""

    ragged: RaggedSize
    detail: str  # the failure, e.g. "fault: misaligned address"
    multiples: dict[str, int]  # variable → the multiple_of to assume from now on ({} when none is evident)

    def message(self) -> str:
        """One line for the user: the size, the failure, and the `multiple_of` that would avoid it."""
        where = f"the original configuration fails at the ragged size {self.ragged.describe()}: {self.detail}"
        if not self.multiples:
            return f"{where}; no multiple_of is evident (set one in the spec, or fix the kernel's tail)"
        wanted = ", ".join(f"{n} = {m}" for n, m in self.multiples.items())
        needs = ", ".join(f"{n} a multiple of {m}" for n, m in self.multiples.items())
        return (
            f"{where}; it evidently needs {needs} (whole {PACK_BYTES}-byte packs): tails are checked at such "
            f"sizes instead (write `multiple_of = {{ {wanted} }}` in the spec to say so)"
        )

    def apply(self, spec: KernelSpec, last: bool) -> tuple[KernelSpec, str]:
        """`spec` assuming the evident multiples (its ragged sizes then keep them), or, with none evident or at
        the `last` attempt, checking no ragged size (the original does not run at them); and the note to show."""
        if self.multiples and not last:
            return replace(spec, multiple_of={**spec.multiple_of, **self.multiples}), self.message()
        where = f"the original configuration fails at the ragged size {self.ragged.describe()}: {self.detail}"
        return replace(spec, ragged=False), f"{where}; tails are not checked at sizes the spec does not list"


def ragged_failure(spec: KernelSpec, ragged: RaggedSize, detail: str) -> RaggedFailure:
    """What a failure of the original at `ragged` evidently asks for: each moved variable that sizes an
    array's innermost dimension must make whole 16-byte packs of that array's elements (8 bf16, 4 float);
    where the spec already asks that much, twice its multiple."""
    multiples: dict[str, int] = {}
    for a in spec.args:
        if not a.shape:
            continue
        try:
            innermost = compile_expr(a.shape[-1]).names
        except ExpressionError:
            continue
        for name in ragged.moved:
            if name not in innermost:
                continue
            have = spec.multiple_of.get(name, 1)
            want = max(1, PACK_BYTES // dtype_size(a.dtype))
            multiples[name] = max(multiples.get(name, 1), want if want > have else have * 2)
    return RaggedFailure(ragged, detail, multiples)
