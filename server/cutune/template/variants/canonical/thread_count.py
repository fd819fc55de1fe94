"""thread_count: a loop that steps by a compile-time thread count (`col += block_size`, `i += kNumThreads`) read as
stepping by `blockDim.x`, where every launch of the kernel in the file launches exactly that many threads.

The count is a template parameter of the kernel (its value the launch's template argument) or a `constexpr`
local with a literal value; the launch's block is an expression or a `dim3` whose x is the same text. Then
`blockDim.x` and the count are equal wherever the kernel runs, and the loops are the block-stride loops the
transforms read. The count may also be an object-like macro with an integer value (`#define WARP_SIZE 32`, in the file
or a project header it includes, defined alike wherever it is): the launch's x is then the macro or its value.
Refused, with the reason, when a launch's block cannot be matched to the count.

Without a launch in the file (a library's kernel, launched through `cudaLaunchKernelEx` or from another file), the
kernel itself may fix its block: every thread reaches a `cub::BlockReduce<T, COUNT>` reduction of the whole block
(`.Sum(v)` or `.Reduce(v, op)` in a statement of the kernel's body, not under a condition or loop, no return before
it), and CUB defines that only on a block of exactly COUNT × 1 × 1 threads (its BLOCK_DIM_Y and Z left 1). The
template is named through `cub::` or under `using namespace cub;` (a project's own `BlockReduce` promises nothing).
A reduction given the number of valid threads (`.Sum(v, n)`) proves nothing: production code runs those on smaller
blocks.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

from tree_sitter import Node

from cutune.cuda.lists import split_top_level
from cutune.cuda.model import SourceModel
from cutune.cuda.parse import parse_source
from cutune.template.edits import EditList, apply_edits
from cutune.template.recipes.base import KernelSource, descendants
from cutune.template.recipes.host import HostResolver, launch_config
from cutune.template.variants.canonical.guard import declarator_target
from cutune.template.variants.canonical.loop_macros import object_macros
from cutune.template.variants.canonical.shape import kernel_body
from cutune.template.variants.loops import local_values, squeezed, written_names

NAME = "thread_count"
# `cub::BlockReduce<T, X, ...>` (hipCUB's too): the template's arguments
_BLOCK_REDUCE = re.compile(r"(?:hip)?cub::BlockReduce<(.+)>")
_USING_CUB = re.compile(r"\busing\s+namespace\s+(?:hip)?cub\s*;")
_WHOLE_BLOCK = {"Sum": 1, "Reduce": 2}
_MACRO_NAME = re.compile(
    r"[A-Z_][A-Z0-9_]*"
)  # a whole-block reduction's method and its arguments without a valid count


def block_size_strides(model: SourceModel, kernel: str, include_dirs: Sequence[str] = ()) -> SourceModel | str | None:
    """The model with `kernel`'s thread-count steps written `blockDim.x`; why not; None when it has none (macros'
    definitions looked up in the headers the file includes, found beside it or in `include_dirs`)."""
    body = kernel_body(model, kernel)
    stepped = set(re.findall(r"\+=\s*([A-Za-z_]\w*)\s*\)", body))
    capitals = {n for n in stepped if _MACRO_NAME.fullmatch(n)}  # a macro by its name's convention, to look it up
    if (
        not stepped & {p.name for p in model.kernel(kernel).template_params}
        and "constexpr" not in body
        and not capitals
    ):
        return None
    src = KernelSource(model, model.kernel(kernel))
    counts = compile_time_counts(src)
    declared = set(counts) | {p.name for p in src.kernel.params} | set(local_values(src)) | written_names(src, src.body)
    macros = {  # `#define WARP_SIZE 32`: the same text wherever the file uses it, host and device alike
        name: value
        for name, value in object_macros(model, include_dirs, capitals - declared).items()
        if value is not None and re.fullmatch(r"\d+[uU]?", value)
    }
    counts |= {name: functools.partial(_literal, value) for name, value in macros.items()}
    steps = []
    for loop in src.in_body("for_statement"):
        update = loop.child_by_field_name("update")
        if update is not None and update.type == "assignment_expression" and src.field(update, "operator") == "+=":
            right = update.child_by_field_name("right")
            if right is not None and src.text(right).strip() in counts:
                steps.append(right)
    if not steps:
        return None
    names = {src.text(s).strip() for s in steps}
    launches = src.launches()
    if not launches and names <= collective_block_sizes(src):
        return _rewritten(model, src, steps)
    if not launches:
        return f"steps by {sorted(names)[0]}, and no launch of {kernel} in this file says how many threads it runs"
    for site, call in launches:
        config = launch_config(call)
        if len(config) < 2:
            return f"the launch at line {src.line(call)} has no block to compare with {sorted(names)[0]}"
        block = config[1]
        dims = HostResolver(src, call).dims_of(block)
        x = src.text(dims[1][0]) if dims is not None and dims[1] else src.text(block)
        for name in sorted(names):
            value = counts[name](site.template_args)
            same = {"".join(value.split()), *([name] if name in macros else [])} if value is not None else set()
            if "".join(x.split()) not in same:
                return (
                    f"steps by {name}, but the launch at line {src.line(call)} runs `{x}` threads per block "
                    f"where {name} is `{value}`"
                )
    return _rewritten(model, src, steps)


def _rewritten(model: SourceModel, src: KernelSource, steps: list[Node]) -> SourceModel:
    """The model with each of `steps` written `blockDim.x`."""
    edits = EditList(src.data)
    for s in steps:
        edits.replace(s.start_byte, s.end_byte, "blockDim.x")
    return parse_source(apply_edits(model.text, edits.edits), model.path, rewrite=True)


def collective_block_sizes(src: KernelSource) -> set[str]:
    """The counts C of the whole-block `cub::BlockReduce<T, C>` reductions every thread of the kernel reaches: CUB
    defines them only on blocks of C × 1 × 1 threads."""
    aliases: dict[str, str] = {}  # `using BlockReduce = cub::BlockReduce<float, C>;` and typedefs, in the body
    for alias in src.in_body("alias_declaration", "type_definition"):
        declared = alias.child_by_field_name("name") or alias.child_by_field_name("declarator")
        kind = alias.child_by_field_name("type")
        if declared is not None and kind is not None:
            aliases[squeezed(src.text(declared))] = squeezed(src.text(kind))
    sizes: set[str] = set()
    for statement in src.body.named_children:  # the body's own statements, up to any return: every thread runs them
        if descendants(statement, "return_statement"):
            break
        if statement.type not in ("declaration", "expression_statement"):
            continue
        for call in descendants(statement, "call_expression"):
            if _branched(call, statement):
                continue
            method, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
            if method is None or method.type != "field_expression" or args is None:
                continue
            made = method.child_by_field_name("argument")
            if made is None or made.type != "call_expression":
                continue
            if _WHOLE_BLOCK.get(src.field(method, "field")) != len(args.named_children):
                continue
            maker = aliases.get(squeezed(src.field(made, "function")), squeezed(src.field(made, "function")))
            if maker.startswith("BlockReduce<") and _USING_CUB.search(src.model.text):
                maker = f"cub::{maker}"  # unqualified under `using namespace cub;`: a project's own is not CUB's
            found = _BLOCK_REDUCE.fullmatch(maker)
            dims = split_top_level(found.group(1), "()<>") if found is not None else []
            if len(dims) >= 2 and all(d == "1" for d in dims[3:]):
                sizes.add(dims[1])
    return sizes


def _branched(node: Node, statement: Node) -> bool:
    """Whether `node` lies in a branch of `?:` or `&&`/`||`, or in a lambda, within `statement`: not every thread
    evaluates it."""
    parent = node.parent
    while parent is not None and parent != statement:
        operator = parent.child_by_field_name("operator") if parent.type == "binary_expression" else None
        if parent.type in ("conditional_expression", "lambda_expression") or (
            operator is not None and operator.type in ("&&", "||")
        ):
            return True
        parent = parent.parent
    return False


Count = Callable[[tuple[str, ...]], str | None]


def compile_time_counts(src: KernelSource) -> dict[str, Count]:
    """Name → a function of a launch's template arguments giving the count's value there (None: unknown)."""
    counts: dict[str, Count] = {}
    for k, p in enumerate(src.kernel.template_params):
        if p.type.strip() in ("int", "unsigned", "unsigned int", "size_t", "uint32_t", "int32_t"):
            counts[p.name] = functools.partial(_argument, k, p.default)
    written = written_names(src, src.body)
    for d in src.in_body("declaration"):
        target = declarator_target(d)
        value = re.fullmatch(r"[^=]*\bconstexpr\b[^=]*=\s*(\d+)\s*;", src.text(d))
        if target is not None and value is not None and src.text(target) not in written:
            counts[src.text(target)] = functools.partial(_literal, value.group(1))
    return counts


def _argument(position: int, default: str | None, args: tuple[str, ...]) -> str | None:
    """A template parameter's value at a launch: its argument there, else its default."""
    return args[position] if position < len(args) else default


def _literal(value: str, args: tuple[str, ...]) -> str | None:
    """A constexpr local's value, the same at every launch."""
    return value
