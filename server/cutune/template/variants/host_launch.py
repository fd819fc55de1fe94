"""host_launch: a variant's launch (spec expressions) written as C++ at a host launch site, in the host's own
terms: `{grid}` and `{block}` become the site's own grid and block (`dim3(grid).x`; `{grid.x}` names the axis
outright), the variant's parameters the tuning struct's members (or values), `warp_size` 32,
`max_threads_per_block` 1024, conditions (`a if c else b`, comparisons, `and`, `or`) C's, a problem size the
host's own name for it (the launch's argument for the kernel parameter of that name, or a host variable of that
name declared before the launch); `min`, `max`, `ceil_div` and `round_up` are spelled out. Anything else (a device
limit such as `sm_count`) has no host spelling cutune can know: HostLaunchError says which name."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Sequence

from tree_sitter import Node

from cutune.cuda.model import LaunchSite
from cutune.errors import CutuneError
from cutune.template.recipes.base import KernelSource
from cutune.template.variants.combine import PLACEHOLDER
from cutune.template.variants.model import Launch

_AXES = ("x", "y", "z")
_OPERATORS: dict[type[ast.operator], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "/",  # launch sizes are never negative: C's division floors them too
    ast.Mod: "%",
}
_WARP_SIZE = "32"
_MAX_THREADS = "1024"  # threads per block on every compute capability since 2.0
_COMPARISONS: dict[type[ast.cmpop], str] = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}


class HostLaunchError(CutuneError):
    """A variant's launch cannot be written at a host launch site; says why."""


def host_config(
    launch: Launch,
    site: LaunchSite,
    params: Sequence[str],
    ref: Callable[[str], str],
    sizes: Callable[[str], str | None] = lambda name: None,
) -> list[str]:
    """The new grid, block and (when the site passes one, or the variant needs one) shared-memory texts of
    the launch `site` for `launch`; `ref` names a variant parameter where the launch is (a tuning-struct
    member, or its value), `sizes` a problem size (None: the host has no name for it)."""
    own_dims = {"grid": site.grid, "block": site.block}
    shared = site.shared_mem if site.shared_mem is not None else "0"
    names = {
        "cutune_shared": f"({shared})",
        "warp_size": _WARP_SIZE,
        "max_threads_per_block": _MAX_THREADS,
        **{f"cutune_{what}_{axis}": f"dim3({own}).{axis}" for what, own in own_dims.items() for axis in _AXES},
        **{p: ref(p) for p in params},
    }
    for expr in (*launch.grid, *launch.block, launch.shared_mem):
        for name in _free_names(PLACEHOLDER.sub("cutune_placeholder", expr)):
            if name not in names and (spelled := sizes(name)) is not None:
                names[name] = spelled

    def dims(exprs: tuple[str, ...], outer: str, what: str) -> str:
        if len(exprs) == 1 and exprs[0].strip().strip("()") == f"{{{what}}}":
            return outer  # the site's own grid or block, as the host writes it
        texts = []
        for i, e in enumerate(exprs):
            axis = _AXES[i]
            spelled = PLACEHOLDER.sub(functools.partial(_placeholder_name, axis=axis), e)
            texts.append(cxx_expression(spelled, names))
        return texts[0] if len(texts) == 1 else f"dim3({', '.join(texts)})"

    config = [dims(launch.grid, site.grid, "grid"), dims(launch.block, site.block, "block")]
    if site.shared_mem is not None or launch.shared_mem.strip() != "0":
        config.append(cxx_expression(PLACEHOLDER.sub("cutune_shared", launch.shared_mem), names))
    return config


def _placeholder_name(m: re.Match[str], axis: str) -> str:
    """The name a launch placeholder takes in `host_config`'s names (`{grid}` in dimension y: cutune_grid_y)."""
    return "cutune_shared" if m.group(1) == "shared_mem" else f"cutune_{m.group(1)}_{m.group(2) or axis}"


def config_edits(site: LaunchSite, config: Sequence[str]) -> list[tuple[int, int, str]]:
    """(start, end, text) byte edits that make `site` launch with `config` (host_config's texts)."""
    spans = site.config_spans
    edits = [(spans[i].start_byte, spans[i].end_byte, text) for i, text in enumerate(config[:2])]
    if len(config) == 3 and len(spans) >= 3:
        edits.append((spans[2].start_byte, spans[2].end_byte, config[2]))
    elif len(config) == 3:
        edits.append((spans[1].end_byte, spans[1].end_byte, f", {config[2]}"))
    return edits


def host_size_name(src: KernelSource, site: LaunchSite, call: Node, variable: str) -> str | None:
    """How the host code names a size variable at a launch: the launch's argument for the kernel parameter of
    that name, else a host variable of that name written before the launch in its function; None if neither."""
    names = [p.name for p in src.kernel.params]
    for name in (variable, f"{variable}_rt"):  # a specialised size's run-time parameter is renamed
        if name in names and names.index(name) < len(site.args):
            arg = site.args[names.index(name)]
            return arg if arg.isidentifier() else f"({arg})"
    function = src.node_at(call.start_byte, "function_definition")
    if function is not None and re.search(
        rf"\b{re.escape(variable)}\b".encode(), src.data[function.start_byte : call.start_byte]
    ):
        return variable
    return None


def _free_names(expr: str) -> list[str]:
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError:
        return []
    return [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)]


def cxx_expression(expr: str, names: dict[str, str]) -> str:
    """A spec expression in C++, each name spelled as `names` says; HostLaunchError for a name it lacks."""
    try:
        tree = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        raise HostLaunchError(f"cannot read the launch expression {expr!r}") from None
    return _node(tree, names)


def _node(node: ast.expr, names: dict[str, str]) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return str(node.value)
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise HostLaunchError(f"the launch reads {node.id}, which the host code has no name for")
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return f"({_node(node.left, names)} {_OPERATORS[type(node.op)]} {_node(node.right, names)})"
    if isinstance(node, ast.IfExp):
        return f"({_node(node.test, names)} ? {_node(node.body, names)} : {_node(node.orelse, names)})"
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARISONS:
        op = _COMPARISONS[type(node.ops[0])]
        return f"({_node(node.left, names)} {op} {_node(node.comparators[0], names)})"
    if isinstance(node, ast.BoolOp):
        joiner = " && " if isinstance(node.op, ast.And) else " || "
        return f"({joiner.join(_node(v, names) for v in node.values)})"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 2 and not node.keywords:
        a, b = (_node(x, names) for x in node.args)
        if node.func.id == "min":
            return f"({a} < {b} ? {a} : {b})"
        if node.func.id == "max":
            return f"({a} > {b} ? {a} : {b})"
        if node.func.id in ("ceil_div", "cdiv"):
            return f"(({a} + {b} - 1) / {b})"
        if node.func.id == "round_up":
            return f"(({a} + {b} - 1) / {b} * {b})"
    raise HostLaunchError(f"the launch expression {ast.unparse(node)!r} has no C++ spelling here")
