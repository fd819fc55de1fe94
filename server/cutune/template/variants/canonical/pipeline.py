"""canonicalise: every canonical step tried on one kernel, in order, each on the previous one's result.

A step takes the parsed file and the kernel's name and returns the rewritten file, the reason it refused
(the kernel has the step's shape but a rewrite could change what it does), or None where the kernel does
not have the step's shape at all. The structural transforms then run on the canonical file unchanged; their
variants' bodies are over the kernel's own parameters, so they stand beside the original body as before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cutune.cuda.model import SourceModel
from cutune.errors import CutuneError
from cutune.template.variants.canonical.counted import NAME as COUNTED
from cutune.template.variants.canonical.counted import counted_to_stride
from cutune.template.variants.canonical.exits import NAME as EXITS
from cutune.template.variants.canonical.exits import exits_to_checks
from cutune.template.variants.canonical.guard import NAME as GUARD
from cutune.template.variants.canonical.guard import grid_stride_guard
from cutune.template.variants.canonical.index_locals import NAME as INDEX_LOCALS
from cutune.template.variants.canonical.index_locals import substitute_index_locals
from cutune.template.variants.canonical.inline import NAME as INLINE
from cutune.template.variants.canonical.inline import inline_looping_helpers
from cutune.template.variants.canonical.ldg import NAME as LDG
from cutune.template.variants.canonical.ldg import plain_ldg_reads
from cutune.template.variants.canonical.loop_macros import NAME as LOOP_MACROS
from cutune.template.variants.canonical.loop_macros import expand_loop_macros
from cutune.template.variants.canonical.loop_temps import NAME as LOOP_TEMPS
from cutune.template.variants.canonical.loop_temps import loop_temporaries
from cutune.template.variants.canonical.offset import NAME as OFFSET
from cutune.template.variants.canonical.offset import offset_to_row
from cutune.template.variants.canonical.pack_rounds import NAME as PACK_ROUNDS
from cutune.template.variants.canonical.pack_rounds import pack_rounds
from cutune.template.variants.canonical.row_count import NAME as ROW_COUNT
from cutune.template.variants.canonical.row_count import block_shape_rows
from cutune.template.variants.canonical.scaled import NAME as SCALED
from cutune.template.variants.canonical.scaled import scaled_to_packs
from cutune.template.variants.canonical.template_args import NAME as TEMPLATE_ARGS
from cutune.template.variants.canonical.template_args import fold_template_args, instantiation
from cutune.template.variants.canonical.thread_count import NAME as THREAD_COUNT
from cutune.template.variants.canonical.thread_count import block_size_strides
from cutune.template.variants.canonical.thread_index import NAME as THREAD_INDEX
from cutune.template.variants.canonical.thread_index import written_out
from cutune.template.variants.canonical.while_loops import NAME as WHILE
from cutune.template.variants.canonical.while_loops import while_to_for

Step = Callable[[SourceModel, str], SourceModel | str | None]
# in order: loops written through macros are expanded before anything reads loops, an index spelled through a
# helper is written out first (the guard reads it), inlined helpers' loops are the kernel's own before loop forms are
# read, `while` loops are `for` loops before their steps are read (a thread count) and before exits at a bound are
# read as bounds checks, the loop forms are stride loops before the guard step looks for a kernel that has none (an
# offset range's loop is read once its step is blockDim.x and it is a `for`; a body's index locals are written out
# after it, which reads its index only as a whole subscript, and before the steps that read a loop's accesses)
STEPS: dict[str, Step] = {
    LOOP_MACROS: expand_loop_macros,
    THREAD_INDEX: written_out,
    LOOP_TEMPS: loop_temporaries,
    INLINE: inline_looping_helpers,
    LDG: plain_ldg_reads,
    WHILE: while_to_for,
    EXITS: exits_to_checks,
    THREAD_COUNT: block_size_strides,
    ROW_COUNT: block_shape_rows,
    OFFSET: offset_to_row,
    INDEX_LOCALS: substitute_index_locals,
    PACK_ROUNDS: pack_rounds,
    COUNTED: counted_to_stride,
    SCALED: scaled_to_packs,
    GUARD: grid_stride_guard,
}


@dataclass(frozen=True)
class Canonical:
    """A kernel's file after the canonical steps: which rewrote it, and why the others that saw their shape refused."""

    model: SourceModel  # the original model when no step applied
    applied: tuple[str, ...]
    refusals: tuple[tuple[str, str], ...]  # (step, reason)
    # where template_args applied: the instantiation the transforms read, (template parameter, argument) each
    instantiation: tuple[tuple[str, str], ...] = ()


def canonicalise(
    model: SourceModel, kernel: str, include_dirs: Sequence[str] = (), template_args: Mapping[str, str] | None = None
) -> Canonical:
    """`kernel`'s file with every step that applies applied, in order (loop macros' and thread-count macros'
    definitions, and helpers the file does not define, looked up in the headers the file includes, found beside it or in
    `include_dirs`); with the spec's `template_args`, first read at that instantiation."""
    steps: dict[str, Step] = {
        **({TEMPLATE_ARGS: functools.partial(fold_template_args, args=template_args)} if template_args else {}),
        **STEPS,
        LOOP_MACROS: functools.partial(expand_loop_macros, include_dirs=tuple(include_dirs)),
        THREAD_COUNT: functools.partial(block_size_strides, include_dirs=tuple(include_dirs)),
        INLINE: functools.partial(inline_looping_helpers, include_dirs=tuple(include_dirs)),
    }
    applied: list[str] = []
    refusals: list[tuple[str, str]] = []
    current = model
    for name, step in steps.items():
        try:
            broken = current.kernel(kernel).has_errors
            # a macro that opens a loop (`KERNEL_LOOP(i, n) { ... }`) is the usual reason a kernel does not parse:
            # its expansion runs on the broken kernel, every other step only on one that parses
            if broken and name != LOOP_MACROS:
                break
            result = step(current, kernel)
            if isinstance(result, SourceModel) and result.kernel(kernel).has_errors:
                # a step's own defect must not reach the transforms; a kernel broken before stays as it was
                result = None if broken else "the rewrite did not parse"
        except CutuneError as e:  # a definition the step cannot read: the transforms say so themselves
            result = str(e)
        if isinstance(result, str):
            refusals.append((name, result))
        elif result is not None:
            current = result
            applied.append(name)
    at = instantiation(model, kernel, template_args) if template_args and TEMPLATE_ARGS in applied else ()
    return Canonical(current, tuple(applied), tuple(refusals), at)
