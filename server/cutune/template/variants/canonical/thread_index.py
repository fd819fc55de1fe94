"""thread_index: a thread or block index spelled through a helper, a macro or a cooperative group written out, so
the loop and guard forms see `blockIdx.x * blockDim.x + threadIdx.x` itself.

A call of a `__device__` function of the file that takes no arguments and only returns an expression over the
thread and block builtins (`return blockIdx.x * blockDim.x + threadIdx.x;`), or a use of an object-like macro
defined as such an expression (`#define GLOBAL_TID (blockIdx.x * blockDim.x + threadIdx.x)`), becomes that
expression in parentheses: the same value, as the kernel computes it anyway. So does `tb.thread_index().x`
(`group_index()`, `group_dim()`) of a local `cg::thread_block tb = cg::this_thread_block();`: threadIdx.x
(blockIdx, blockDim). The linear ranks and sizes of the grid or the block as a cooperative group
(`cg::this_grid().thread_rank()`, `grid.size()`, `tb.thread_rank()`) count the y and z axes too, so they become the
builtins only where every launch in the file is 1-D in grid and block: `(unsigned long long)blockIdx.x * blockDim.x
+ threadIdx.x` (64-bit, as thread_rank() returns it), `(unsigned long long)gridDim.x * blockDim.x`, threadIdx.x,
blockDim.x. And the thread index put back together from its warp and lane, `warp * W + lane` with the
locals `warp = threadIdx.x / W` and `lane = threadIdx.x % W` (or `>> k` and `& (W - 1)`, W = 2^k), is threadIdx.x:
for a non-negative index, (t / W) * W + t % W = t.
"""

from __future__ import annotations

import re
from collections import Counter

from tree_sitter import Node

from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.recipes.host import launched_one_dimensional
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.inline import _callee as callee
from cutune.template.variants.inline import _helpers as helpers
from cutune.template.variants.loops import balanced, constant_value, index_form, local_values, written_names

NAME = "thread_index"
# an expression of builtins, literals, casts to integer types and arithmetic: nothing that could differ in place
_BUILTINS = re.compile(
    r"(?:(?:blockIdx|blockDim|threadIdx|gridDim)\.[xyz]|\d+[uUlL]*|static_cast<[\w ]+>|int64_t|uint64_t|int32_t|"
    r"uint32_t|size_t|long|unsigned|int|[\s()+*/%-])+"
)


# a cooperative-groups block's index accessors are the builtins: `tb.thread_index().x` is threadIdx.x
_BLOCK_GROUP = re.compile(r"(?:const)?(?:\w+::)*thread_block(\w+)=(?:\w+::)*this_thread_block\(\);")
_GROUP_FIELD = re.compile(r"(\w+)\.(thread_index|group_index|group_dim)\(\)\.([xyz])")
_GROUP_BUILTINS = {"thread_index": "threadIdx", "group_index": "blockIdx", "group_dim": "blockDim"}
# the grid or the block as a cooperative group, by a local (`cg::grid_group g = cg::this_grid();`, `auto`) or called
# in place (`cg::this_grid().thread_rank()`), and its linear rank and size: on a 1-D grid of 1-D blocks, the builtins
_GROUP_LOCAL = re.compile(
    r"(?:const)?(?:(?:\w+::)*(?:grid_group|thread_block)|auto)&?(\w+)=((?:\w+::)*this_(?:grid|thread_block))\(\);"
)
_GROUP_CALL = re.compile(r"(?:(\w+)|((?:\w+::)*this_(?:grid|thread_block))\(\))\.(thread_rank|size|num_threads)\(\)")
_LINEAR = {
    ("grid", "thread_rank"): "(unsigned long long)blockIdx.x * blockDim.x + threadIdx.x",
    ("grid", "size"): "(unsigned long long)gridDim.x * blockDim.x",
    ("grid", "num_threads"): "(unsigned long long)gridDim.x * blockDim.x",
    ("thread_block", "thread_rank"): "threadIdx.x",
    ("thread_block", "size"): "blockDim.x",
    ("thread_block", "num_threads"): "blockDim.x",
}


def written_out(model: SourceModel, kernel: str) -> SourceModel | None:
    """The model with `kernel`'s index helpers and macros written out; None when it uses none."""
    text = kernel_body(model, kernel)
    rejoined = "threadIdx" in text and ("/" in text or ">>" in text)  # a warp split off the thread index
    groups = "this_thread_block" in text or "this_grid" in text
    if not groups and not rejoined and not any(name in text for name in _names(model)):
        return None
    src = KernelSource(model, model.kernel(kernel))
    values: dict[str, str] = {}
    for name, found in helpers(src).items():
        body = found[0].definition.child_by_field_name("body") if len(found) == 1 else None
        declarator = found[0].definition.child_by_field_name("declarator")
        parameters = declarator.child_by_field_name("parameters") if declarator is not None else None
        statements = [c for c in body.named_children if c.type != "comment"] if body is not None else []
        no_args = parameters is not None and src.text(parameters).replace(" ", "") in ("()", "(void)")
        if no_args and found[0].template is None and len(statements) == 1 and statements[0].type == "return_statement":
            value = src.text(statements[0])[len("return") :].strip().rstrip(";")
            if _BUILTINS.fullmatch(value):
                values[name] = value
    macros = {m.name: m.value for m in model.macros if _BUILTINS.fullmatch(m.value.strip()) and "." in m.value}
    edits = EditList(src.data)
    for call in src.in_body("call_expression"):
        name, scope = callee(src, call)
        arguments = call.child_by_field_name("arguments")
        if name in values and not scope and arguments is not None and not arguments.named_children:
            edits.replace(call.start_byte, call.end_byte, _wrapped(values[name]))
    for node in descendants(src.body, "identifier"):
        if src.text(node) in macros and (node.parent is None or node.parent.type != "call_expression"):
            edits.replace(node.start_byte, node.end_byte, _wrapped(macros[src.text(node)]))
    blocks = _thread_blocks(src)
    for node in src.in_body("field_expression"):
        field = _GROUP_FIELD.fullmatch("".join(src.text(node).split()))
        if field is not None and field.group(1) in blocks:
            edits.replace(node.start_byte, node.end_byte, f"{_GROUP_BUILTINS[field.group(2)]}.{field.group(3)}")
    for node, value in _linear_ranks(src) if groups else []:
        edits.replace(node.start_byte, node.end_byte, _wrapped(value))
    for node in _rejoined(src) if rejoined else []:
        edits.replace(node.start_byte, node.end_byte, "threadIdx.x")
    if not edits.edits:
        return None
    return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)


def _rejoined(src: KernelSource) -> list[Node]:
    """The sums `warp * W + lane` (either order of either) of the kernel whose locals split threadIdx.x by the same
    W: `warp = threadIdx.x / W` (`>> k`), `lane = threadIdx.x % W` (`& (W - 1)`), never written again."""
    declared = Counter(
        src.text(n) for d in src.in_body("init_declarator") if (n := d.child_by_field_name("declarator"))
    )
    values = {name: v for name, v in local_values(src).items() if declared[name] == 1}  # one value wherever read

    def number(text: str) -> int | None:
        return constant_value(src, text)

    def width(text: str) -> int | str | None:  # W by its value, or by its name where the file does not give one
        value = number(text)
        return value if value is not None else text.strip("()") if text.strip("()").isidentifier() else None

    def split(name: str) -> tuple[str, int | str] | None:  # ("warp" or "lane", W) of a local splitting threadIdx.x
        m = re.fullmatch(r"\(?(\w+(?:\.\w+)?)\)?(/|%|>>|&)\(?(\w+)\)?", values.get(name, ""))
        if m is None or index_form(values.get(m.group(1), m.group(1))) != "threadIdx.x":
            return None
        w = width(m.group(3)) if m.group(2) in ("/", "%") else number(m.group(3))
        if w is None or (isinstance(w, int) and w <= 0):
            return None
        if isinstance(w, int) and m.group(2) in (">>", "&"):  # `>> k` is `/ 2^k`; `& (2^k - 1)` is `% 2^k`
            w = 1 << w if m.group(2) == ">>" else w + 1
            if w & (w - 1):
                return None
        return ("warp" if m.group(2) in ("/", ">>") else "lane", w)

    def rejoins(product: Node | None, lane: Node | None) -> bool:  # `warp * W` (or `warp << k`) and `lane`
        while product is not None and product.type == "parenthesized_expression" and product.named_child_count == 1:
            product = product.named_children[0]
        if product is None or lane is None or product.type != "binary_expression":
            return False
        a, b = product.child_by_field_name("left"), product.child_by_field_name("right")
        op = src.field(product, "operator")
        if a is None or b is None or op not in ("*", "<<") or (lane_split := split(src.text(lane).strip())) is None:
            return False
        for warp, factor in [(a, b), (b, a)] if op == "*" else [(a, b)]:
            shift = number(src.text(factor)) if op == "<<" else None
            w = (1 << shift if shift is not None else None) if op == "<<" else width(src.text(factor))
            if w is not None and lane_split == ("lane", w) and split(src.text(warp).strip()) == ("warp", w):
                return True
        return False

    sums = [n for n in src.in_body("binary_expression") if src.field(n, "operator") == "+"]
    return [
        n
        for n in sums
        if any(
            rejoins(p, q)
            for p, q in (
                (n.child_by_field_name("left"), n.child_by_field_name("right")),
                (n.child_by_field_name("right"), n.child_by_field_name("left")),
            )
        )
    ]


def _linear_ranks(src: KernelSource) -> list[tuple[Node, str]]:
    """The calls of a grid's or a block's `thread_rank()`, `size()` or `num_threads()` (the group a local never
    reassigned, or `this_grid()` called in place), each with its value in builtins, where every launch in the file is
    1-D in grid and block (the ranks count y and z too); none where one is not, or the file does not launch it."""
    written = written_names(src, src.body)
    groups: dict[str, str] = {}
    for d in src.in_body("declaration"):
        found = _GROUP_LOCAL.fullmatch("".join(src.text(d).split()))
        if found is not None and found.group(1) not in written:
            groups[found.group(1)] = "grid" if found.group(2).endswith("this_grid") else "thread_block"
    calls = []
    for call in src.in_body("call_expression"):
        found = _GROUP_CALL.fullmatch("".join(src.text(call).split()))
        if found is None:
            continue
        group = groups.get(found.group(1) or "") if found.group(1) else found.group(2).rsplit("this_", 1)[1]
        if group is not None:
            calls.append((call, _LINEAR[(group, found.group(3))]))
    return calls if calls and launched_one_dimensional(src) else []


def _thread_blocks(src: KernelSource) -> set[str]:
    """The locals holding the block as a cooperative group (`cg::thread_block tb = cg::this_thread_block();`),
    never reassigned."""
    written = written_names(src, src.body)
    names = set()
    for d in src.in_body("declaration"):
        found = _BLOCK_GROUP.fullmatch("".join(src.text(d).split()))
        if found is not None and found.group(1) not in written:
            names.add(found.group(1))
    return names


def _wrapped(value: str) -> str:
    """The expression in parentheses (once)."""
    value = value.strip()
    return value if value.startswith("(") and value.endswith(")") and balanced(value[1:-1]) else f"({value})"


def _names(model: SourceModel) -> set[str]:
    """The names a kernel could spell its index through: the file's device functions and macros."""
    data = model.text.encode("utf-8")
    helpers = {f.name for f in model.device_functions if b"Idx." in data[f.span.start_byte : f.span.end_byte]}
    return helpers | {m.name for m in model.macros if "Idx." in m.value}
