"""reroll: a run of hand-unrolled element stores (`y[0] = f(q[0]); y[1] = f(q[1]);`, a dequantiser's pair of
weights) written back as the loop it unrolls (`for (int r = 0; r < 2; ++r) y[r] = f(q[r]);`), so the transforms that
read a thread's short loops (thread_packs) see it.

A run is 2, 4, 8 or 16 consecutive expression statements of one block, each a store to a subscript, that are the
same token for token except for decimal integer literals, each such literal the whole index of a subscript and
counting up by one from the run's first statement to its last. The loop runs the statements in the same order with
the same values (the index in place of each literal), so it is the run, whatever the statements read or write.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource, descendants

PREFIX = "cutune_rr"
COUNTS = (16, 8, 4, 2)  # the longest run first
_DECIMAL = re.compile(r"[0-9]+")


def _leaves(node: Node) -> list[Node]:
    if node.child_count == 0:
        return [node]
    return [leaf for child in node.children for leaf in _leaves(child)]


def _store(src: KernelSource, node: Node) -> bool:
    expr = node.named_children[0] if node.type == "expression_statement" and node.named_children else None
    if expr is None or expr.type != "assignment_expression":
        return False
    left = expr.child_by_field_name("left")
    return left is not None and left.type == "subscript_expression"


def _counted(src: KernelSource, run: list[Node]) -> list[int] | None:
    """The leaf positions at which `run`'s statements count up by one (subscript indices), None where the run is
    not one statement unrolled."""
    first = _leaves(run[0])
    rest = [_leaves(s) for s in run[1:]]
    if any(len(leaves) != len(first) for leaves in rest):
        return None
    positions: list[int] = []
    for at, leaf in enumerate(first):
        texts = [src.text(leaf), *(src.text(leaves[at]) for leaves in rest)]
        if all(t == texts[0] for t in texts):
            continue
        if leaf.type != "number_literal" or not all(_DECIMAL.fullmatch(t) for t in texts):
            return None
        if [int(t) - int(texts[0]) for t in texts] != list(range(len(run))):
            return None
        index = leaf.parent
        if index is None or index.type != "subscript_argument_list" or len(index.named_children) != 1:
            return None
        positions.append(at)
    return positions or None


def rerolled(src: KernelSource) -> str | None:
    """The file's text with the kernel's runs of unrolled element stores written as loops; None where it has none."""
    edits = EditList(src.data)
    rolled = 0
    for block in [src.body, *(b for b in descendants(src.body, "compound_statement") if b.id != src.body.id)]:
        statements = [c for c in block.named_children if c.type != "comment"]
        i = 0
        while i < len(statements):
            for count in COUNTS:
                run = statements[i : i + count]
                if len(run) == count and all(_store(src, s) for s in run):
                    positions = _counted(src, run)
                    if positions is not None:
                        break
            else:
                i += 1
                continue
            index = f"{PREFIX}{rolled}"
            leaves = _leaves(run[0])
            body = src.data[run[0].start_byte : run[0].end_byte]
            for at in sorted(positions, key=lambda p: leaves[p].start_byte, reverse=True):
                leaf = leaves[at]
                start, end = leaf.start_byte - run[0].start_byte, leaf.end_byte - run[0].start_byte
                value = src.text(leaf)
                body = body[:start] + (index if value == "0" else f"{index} + {value}").encode() + body[end:]
            loop = f"for (int {index} = 0; {index} < {count}; ++{index}) {{ {body.decode()} }}"
            edits.replace(run[0].start_byte, run[-1].end_byte, loop)
            rolled += 1
            i += count
    return apply_edits(src.model.text, edits.edits) if rolled else None
