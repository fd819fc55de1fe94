"""Variants: new versions of a kernel with a different structure, their own parameters and launch, and
where they came from.

A variant is a new body for the same kernel (same name, same parameter list), so the spec's arguments,
the reference and every correctness check apply unchanged. `combine.with_variants` puts the original
body and every variant's body into one kernel behind `if constexpr (VARIANT == k)`, with `VARIANT` (0 =
the original) and the variants' own parameters as template parameters, and makes the spec's launch
expressions choose each variant's grid and block. The search, the per-size choice, replay and apply then
treat a variant as one more parameter value; at `VARIANT = 0` the kernel is the original.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from cutune.cuda.model import SourceModel
from cutune.spec import KernelSpec
from cutune.template.model import TunableParam


@dataclass(frozen=True)
class Provenance:
    """Where a variant came from: a built-in transform or an LLM step, applied to a parent."""

    origin: str  # the transform's name, or "llm"
    parent: str = ""  # the variant it was derived from; "" for the original kernel
    note: str = ""  # what changed, in one line
    step: int | None = None  # the agent step that proposed it, when an agent did


@dataclass(frozen=True)
class Launch:
    """A variant's launch, as spec expressions over sizes, its parameters and the device limits."""

    grid: tuple[str, ...]
    block: tuple[str, ...]
    shared_mem: str = "0"


@dataclass(frozen=True)
class Variant:
    """A restructured body of one kernel, with the parameters and launch it needs."""

    name: str  # unique among one kernel's variants, e.g. "vectorized"; a C identifier
    body: str  # the statements of the kernel body (no outer braces), over the kernel's own parameter names
    params: tuple[TunableParam, ...] = ()  # TEMPLATE-bound ones become template parameters of the kernel
    constraints: tuple[str, ...] = ()  # spec expressions over sizes, its parameters and device limits
    launch: Launch | None = None  # None: the spec's own grid, block and shared memory
    helpers: str = ""  # device code the body needs, placed before the kernel; names unique to the variant
    provenance: Provenance = Provenance("")
    # the template arguments the body was read at, (parameter, argument): other instantiations run the original body
    # and launch as the original does; () for a body that fits every instantiation
    instantiation: tuple[tuple[str, str], ...] = ()
    # (a parent's constraint, the one that stands for it here): what this variant's launch relaxes where it is
    # chained onto a parent that has that constraint
    lifts: tuple[tuple[str, str], ...] = ()


# a helper block under its own include guard: what a variant's helpers are made of (one or, chained, several)
_GUARDED = re.compile(r"^#ifndef (CUTUNE_\w+)\n.*?^#endif\b[^\n]*", re.M | re.S)


def joined_helpers(*texts: str) -> str:
    """The helpers of several variants as one text, each guarded block (`#ifndef CUTUNE_X` ... `#endif`) once and
    any other text once: a compile unit built from the kernel's dependencies drops the guards, so a helper that
    appeared twice would be defined twice."""
    blocks: dict[str, str] = {}
    for text in texts:
        rest = text
        for m in _GUARDED.finditer(text):
            blocks.setdefault(m.group(1), m.group(0).strip())
            rest = rest.replace(m.group(0), "")
        if rest.strip():
            blocks.setdefault(rest.strip(), rest.strip())
    return "\n\n".join(blocks.values())


class Transform(ABC):
    """A built-in structural rewrite: returns a Variant, or raises TransformRefused saying why not."""

    name: ClassVar[str]
    # its variant keeps the kernel's loops and is the original at its parameters' defaults: the other
    # transforms also apply to its body, and such a chained variant stands in for their plain one
    chainable: ClassVar[bool] = False
    # whether it is also tried on a chainable variant's body (one that regroups the same loops does; one that
    # regroups the items the other spreads does not), or the transforms whose bodies it is tried on (a named one
    # that is not chainable too: its chained variant stands beside the plain one, which it is not at any defaults)
    chains_onto: ClassVar[bool | frozenset[str]] = True

    def chains_onto_variant(self, parent: str) -> bool:
        """Whether it is tried on the body of a variant the transform `parent` made."""
        return self.chains_onto if isinstance(self.chains_onto, bool) else parent in self.chains_onto

    @abstractmethod
    def apply(self, model: SourceModel, kernel: str, spec: KernelSpec | None) -> Variant:
        """The variant of `kernel` in `model`; `spec` (when known) tells sizes, dtypes and launch."""
