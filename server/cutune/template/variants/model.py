"""Variants: new versions of a kernel with a different structure, their own parameters and launch, and
where they came from.

A variant keeps the original kernel's parameter list (so the spec's arguments, the reference and every
correctness check apply unchanged) and lives in a source that still holds the original: its kernel is
added beside it under its own name. At its space's defaults a variant need not equal the original's
speed, only its results.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from cutune.cuda.model import SourceModel
from cutune.template.model import Template
from cutune.template.spec import KernelSpec


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
    """A restructured kernel: `template.kernel` names it inside `template.source`, beside the original."""

    name: str  # unique among one kernel's variants, e.g. "vectorized"
    template: Template  # its source, kernel name, space and constraints
    launch: Launch | None  # None: the spec's own grid, block and shared memory
    provenance: Provenance


class Transform(ABC):
    """A built-in structural rewrite: returns a Variant, or raises TransformRefused saying why not."""

    name: ClassVar[str]

    @abstractmethod
    def apply(self, model: SourceModel, kernel: str, spec: KernelSpec | None) -> Variant:
        """The variant of `kernel` in `model`; `spec` (when known) tells sizes, dtypes and launch."""
