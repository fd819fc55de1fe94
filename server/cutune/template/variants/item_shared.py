"""item_shared: what block_items needs to put several items of a kernel that cooperates through shared memory and
`__syncthreads()` in one block.

Each item gets its own copy of every `__shared__` array, the one of its row of threads along y:

    __shared__ float sums[32];        →      __shared__ float cutune_items_sums[ITEMS][32];
                                              auto& sums = cutune_items_sums[threadIdx.y];

so the body, which names `sums`, reads and writes its own item's copy. Dynamic shared memory is cut into as many
equal slices as the block has items, the launch giving each item the original's bytes rounded up to 128 (so every
slice starts as aligned as the whole did, up to 128 bytes):

    extern __shared__ float buf[];    →      extern __shared__ float cutune_items_buf[];
                                              auto& buf = cutune_item_dynamic(cutune_items_buf);

`cutune_item_dynamic` reads the launch's bytes (`%dynamic_smem_size`) and returns row threadIdx.y's slice as an array
of unknown bound, so `buf[i]`, `buf + i` and `reinterpret_cast<S&>(buf)` read the item's own.

A barrier then waits for the threads of every item in the block: right only where every item reaches the same
barriers the same number of times, which holds where nothing that decides whether a thread reaches a barrier (the
conditions of the `if`s, loops and switches around it, and of every `return`, `break` and `continue` on the way)
differs between items: no block index, no memory read, no call but a cast or integer arithmetic (`min`,
`ceil_div`), no local set from those or under a condition that reads them. The thread index, block size, the other
grid axes, parameters and template parameters are the same for the threads of every item that the original's
threads in one block were.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from cutune.template.edits import EditList
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.variants.loops import ARITHMETIC, line_indent, squeezed, touches_memory
from cutune.template.variants.row_reduce import ALLREDUCE

PREFIX = "cutune_items_"
DYNAMIC = "cutune_item_dynamic"
# the function that gives an item its slice of the block's dynamic shared memory (see the module's docstring)
DYNAMIC_HELPER = f"""\
#ifndef CUTUNE_ITEM_DYNAMIC_SHARED
#define CUTUNE_ITEM_DYNAMIC_SHARED
// cutune block_items: row threadIdx.y's slice of the block's dynamic shared memory, blockDim.y equal slices
template <typename CutuneT>
__device__ __forceinline__ CutuneT (&{DYNAMIC}(CutuneT* cutune_all))[] {{
  unsigned int cutune_bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(cutune_bytes));
  char* cutune_slice = reinterpret_cast<char*>(cutune_all) + threadIdx.y * (cutune_bytes / blockDim.y);
  return *reinterpret_cast<CutuneT (*)[]>(cutune_slice);
}}
#endif
"""
BARRIER = "__syncthreads"
_BRANCHES = ("if_statement", "for_statement", "while_statement", "do_statement", "switch_statement")
_EXITS = ("return_statement", "break_statement", "continue_statement")
_SETS = ("init_declarator", "assignment_expression", "update_expression")
_LOOPS = ("for_statement", "for_range_loop", "while_statement", "do_statement")
# a `__shared__` variable's name where it is declared (`__shared__ float s[32];`, `__shared__ int n;`)
_OUTER_SHARED = re.compile(rb"__shared__\s[^;{}()=]*?\b([A-Za-z_]\w*)\s*(?:\[[^;{}]*\])*\s*;")
# helpers of block-wide cooperation by name (`blockReduceSum`, `block_reduce_max`, `BlockScan`, `block_barrier`)
_BLOCK_CALL = re.compile(r"block_?(?:all_?)?(?:reduce|sum|max|min|scan|sync|barrier|prefix)|barrier|syncthreads", re.I)


def shared_declarations(src: KernelSource) -> list[Node]:
    """The kernel body's `__shared__` declarations."""
    return [d for d in src.in_body("declaration") if "__shared__" in src.text(d).split("=")[0].split()]


def barriers(src: KernelSource) -> list[Node]:
    """The body's `__syncthreads()` calls, and its calls of cutune's helpers that wait at one inside (a reduction of
    row_reduce's: whether every item reaches the helper's barrier is whether it reaches the call)."""
    waits = {BARRIER, ALLREDUCE}
    return [
        c for c in src.in_body("call_expression") if re.sub(r"<.*>$", "", squeezed(src.field(c, "function"))) in waits
    ]


def per_item_shared(src: KernelSource, edits: EditList, rows: str) -> str | None:
    """Give each item (row of threads along y, `rows` of them at most) its own copy of every `__shared__` array of
    the body, adding the rewrite to `edits`; or why not."""
    for declaration in shared_declarations(src):
        dynamic = bool(re.search(r"\bextern\b", src.text(declaration)))
        declarators = declaration.children_by_field_name("declarator")
        if len(declarators) != 1 or declarators[0].type == "init_declarator":
            return f"a `__shared__` declaration (line {src.line(declaration)}) declares several names or a value"
        name = next((n for n in descendants(declarators[0], "identifier")), None)
        if name is None:
            return f"a `__shared__` declaration (line {src.line(declaration)}) declares no plain name"
        own = src.text(name)
        if any(src.text(n) == f"{PREFIX}{own}" for n in src.in_body("identifier")):
            return f"already names something {PREFIX}{own}"
        indent = line_indent(src.data, declaration.start_byte)
        if dynamic:
            edits.replace(name.start_byte, name.end_byte, f"{PREFIX}{own}")
            edits.insert(declaration.end_byte, f"\n{indent}auto& {own} = {DYNAMIC}({PREFIX}{own});")
            continue
        edits.replace(name.start_byte, name.end_byte, f"{PREFIX}{own}[{rows}]")
        edits.insert(declaration.end_byte, f"\n{indent}auto& {own} = {PREFIX}{own}[threadIdx.y];")
    return None


def dynamic_shared(src: KernelSource) -> bool:
    """Whether the body declares dynamic shared memory (`extern __shared__`)."""
    return any(re.search(r"\bextern\b", src.text(d)) for d in shared_declarations(src))


def outer_shared(src: KernelSource) -> str | None:
    """Why the body reads shared memory declared outside it (at file scope: every item would share it); None when
    it does not."""
    read = {src.text(n) for n in src.in_body("identifier")}
    for m in _OUTER_SHARED.finditer(src.data):
        name = m.group(1).decode()
        token = src.root.descendant_for_byte_range(m.start(), m.start())
        in_code = token is not None and token.type not in ("comment", "string_literal", "string_content")
        if name in read and in_code and src.node_at(m.start(), "function_definition") is None:
            return f"reads {name}, shared memory declared outside any function: every item would share it"
    return None


def cooperating_call(src: KernelSource, defined: set[str]) -> str | None:
    """Why a call to a function the file does not define may make the block's threads meet (its name says it
    reduces or scans over the block, or waits at a barrier); None when no call does."""
    for call in src.in_body("call_expression"):
        callee = "".join(src.field(call, "function").split())
        name = re.sub(r"<.*>$", "", callee).split("::")[-1].split(".")[-1]
        if name not in defined and _BLOCK_CALL.search(name):
            return (
                f"calls {callee} (line {src.line(call)}), defined elsewhere, whose name says it makes the block's "
                "threads meet: items sharing a block would meet too"
            )
    return None


def barrier_blocker(src: KernelSource) -> str | None:
    """Why the items of one block might not reach the same barriers the same number of times; None when they do."""
    found = barriers(src)
    if not found:
        return None
    for node in src.in_body("lambda_expression", "goto_statement"):
        return f"has a {node.type.split('_')[0]} (line {src.line(node)}): its barriers cannot be followed"
    varying = _item_varying(src)
    looped = [
        loop for loop in src.in_body(*_LOOPS) if any(loop.start_byte <= b.start_byte < loop.end_byte for b in found)
    ]
    exits = [e for e in src.in_body(*_EXITS) if e.type == "return_statement" or _owner(e) in looped]
    for node in [*found, *exits]:
        why = _varying_path(src, node, varying)
        if why:
            what = "a barrier" if node in found else f"a `{node.type.split('_')[0]}`"
            return f"{what} (line {src.line(node)}) is reached or not by {why}, which may differ between items"
    return None


def _owner(exit: Node) -> Node | None:
    """The loop (or switch, for a `break`) a `break` or `continue` leaves."""
    parent = exit.parent
    kinds = (*_LOOPS, "switch_statement") if exit.type == "break_statement" else _LOOPS
    while parent is not None and parent.type not in kinds:
        parent = parent.parent
    return parent


def _item_varying(src: KernelSource) -> set[str]:
    """The body's locals whose values may differ between items: set from the block index, memory or a call, from
    another such local, or under a condition that reads one."""
    varying: set[str] = set()
    sets = list(src.in_body(*_SETS))
    while True:
        grown = set(varying)
        for node in sets:
            target, value = _set_parts(src, node)
            if target is None or target in grown:
                continue
            if (value is not None and _varies(src, value, grown)) or _varying_path(src, node, grown):
                grown.add(target)
        if grown == varying:
            return varying
        varying = grown


def _set_parts(src: KernelSource, node: Node) -> tuple[str | None, Node | None]:
    """(the name a declaration, assignment or update sets, the value it sets it from: None for `++x`)."""
    if node.type == "init_declarator":
        target, value = node.child_by_field_name("declarator"), node.child_by_field_name("value")
    elif node.type == "assignment_expression":
        target, value = node.child_by_field_name("left"), node.child_by_field_name("right")
    else:
        target, value = node.child_by_field_name("argument"), None
    # a field or element set (`s.max = v`, `acc[i] = v`): the whole local varies with it
    while target is not None and target.type in (
        "field_expression",
        "subscript_expression",
        "parenthesized_expression",
    ):
        target = target.child_by_field_name("argument") or (target.named_children[0] if target.named_children else None)
    name = squeezed(src.text(target)) if target is not None else ""
    return (name if re.fullmatch(r"[A-Za-z_]\w*", name) else None), value


def _varying_path(src: KernelSource, node: Node, varying: set[str]) -> str:
    """The first condition on the way from the body to `node` that may differ between items ('' when none)."""
    current, parent = node, node.parent
    while parent is not None and parent != src.body:
        if parent.type in _BRANCHES:
            for field in ("condition", "initializer", "update", "value"):
                part = parent.child_by_field_name(field)
                if part is not None and part != current and _varies(src, part, varying):
                    return f"`{squeezed(src.text(part))}`"
        elif parent.type == "conditional_expression":
            condition = parent.child_by_field_name("condition")
            if condition is not None and condition != current and _varies(src, condition, varying):
                return f"`{squeezed(src.text(condition))}`"
        current, parent = parent, parent.parent
    return ""


def _varies(src: KernelSource, node: Node, varying: set[str]) -> bool:
    """Whether `node`'s value may differ between items: it reads the block index, memory, a call other than a cast
    or integer arithmetic, or a varying local."""
    if touches_memory(src, node, pure=ARITHMETIC):
        return True
    if any(squeezed(src.text(n)) == "blockIdx.x" for n in descendants(node, "field_expression")):
        return True
    return any(src.text(n) in varying for n in descendants(node, "identifier"))
