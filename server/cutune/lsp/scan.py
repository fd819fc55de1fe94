"""A first look at a document before its analysis is ready: where its `__global__` kernels are defined.

The same tree-sitter declarations as the source model (`cutune.cuda.parse.outline`), without the rest of
the model: the tree is parsed under the document's path, so the analysis that follows re-uses it, and
after an edit it is re-parsed incrementally (about 1 ms for 5,000 lines). Only the first look at a newly
opened file pays for a whole parse (about 40 ms for 5,000 lines).
"""

from __future__ import annotations

from dataclasses import dataclass

from cutune.cuda.parse import outline
from cutune.template.tuning import tuning_name


@dataclass(frozen=True, slots=True)
class KernelHeader:
    """A kernel definition found by the first look: its name and the (zero-based) line where it starts."""

    name: str
    line: int
    templatized: bool  # the file has its `<name>_tuning` struct


def scan_kernels(text: str, path: str | None = None) -> tuple[KernelHeader, ...]:
    """The `__global__` function definitions of a CUDA text, as the source model finds them; `path` names
    the tree to re-use (the one `parse_source(text, path)` parses)."""
    found = outline(text, path)
    return tuple(KernelHeader(name, line, tuning_name(name) in found.types) for name, line in found.kernels)
