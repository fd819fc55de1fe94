"""Writing a per-size dispatch (a DispatchPlan) into the host code: each range of sizes launches its configuration.

A branch that runs a structural variant (VARIANT = k) launches it with the variant's own grid and block,
spelled at the launch by `variants.host_launch` with the branch's values written in.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tree_sitter import Node

from cutune.cuda.model import LaunchSite
from cutune.errors import SourceError
from cutune.template.edits import EditList
from cutune.template.expr import compile_expr
from cutune.template.model import Binding, Config, Space
from cutune.template.recipes.base import KernelSource
from cutune.template.recipes.index_bits import NARROW_LIMIT, widened
from cutune.template.recipes.specialize import static_param
from cutune.template.tuning import value_text
from cutune.template.variants.canonical.template_args import literal_value
from cutune.template.variants.combine import VARIANT
from cutune.template.variants.host_launch import (
    HostLaunchError,
    config_edits,
    cxx_expression,
    host_config,
    host_size_name,
)
from cutune.template.variants.model import Variant
from cutune.tune.dispatch import Branch, DispatchPlan, branch_upper

MARKER = "// cutune: per-size configurations of"


@dataclass(frozen=True)
class _Region:
    """Host statements to repeat per branch: from the first that reads the tuning struct to the launch."""

    start: int
    end: int
    calls: tuple[tuple[LaunchSite, Node], ...]
    variants: tuple[Variant, ...] = ()  # the combined template's structural variants (VARIANT = 1, 2, ...)
    extents: tuple[str, ...] = ()  # the spec's index extents (KernelSpec.extent_exprs), for the INDEX_BITS guard


def dispatch_edits(
    src: KernelSource,
    edits: EditList,
    plan: DispatchPlan,
    space: Space,
    sizes: Sequence[Mapping[str, int]],
    note: str,
    variants: Sequence[Variant] = (),
    extents: Sequence[str] = (),
) -> None:
    """Replace each launch of the kernel by an `if` chain on the plan's variable, one branch per range;
    a branch that runs a structural variant (VARIANT = k, `variants[k - 1]`) launches with its grid and block;
    one with 32-bit indices (INDEX_BITS) only where the host's sizes keep every one of `extents` (the spec's
    `extent_exprs`) within the limit, its 64-bit form elsewhere (and everywhere when the host cannot spell them)."""
    if MARKER.encode() in src.data:
        raise SourceError(
            "the file holds a per-size dispatch already: remove it before applying again", path=src.model.path
        )
    regions: dict[tuple[int, int], list[tuple[LaunchSite, Node]]] = {}
    for site, call in src.launches():
        start, end = _region(src, call)
        regions.setdefault((start, end), []).append((site, call))
    if not regions:
        raise SourceError(f"{src.kernel.name} has no launch in this file to dispatch", path=src.model.path)
    for (start, end), calls in regions.items():
        region = _Region(start, end, tuple(calls), tuple(variants), tuple(extents))
        edits.replace(start, end, _chain(src, region, plan, space, sizes, note))


def _region(src: KernelSource, call: Node) -> tuple[int, int]:
    statement = call.parent
    while statement is not None and (statement.parent is None or statement.parent.type != "compound_statement"):
        statement = statement.parent
    if statement is None or statement.parent is None:
        raise SourceError(f"the launch at line {src.line(call)} is not in a function body", path=src.model.path)
    reference = re.compile(rf"\b{re.escape(src.struct_name)}::".encode())
    cur: Node = statement
    while True:
        block = cur.parent
        assert block is not None
        before = [s for s in block.named_children if s.end_byte <= cur.start_byte]
        reading = [s for s in before if reference.search(src.data[s.start_byte : s.end_byte])]
        if reading:
            return reading[0].start_byte, cur.end_byte
        outer = block.parent
        while outer is not None and (outer.parent is None or outer.parent.type != "compound_statement"):
            if outer.type == "function_definition":
                return cur.start_byte, cur.end_byte
            outer = outer.parent
        if outer is None:
            return cur.start_byte, cur.end_byte
        cur = outer


def _host_name(src: KernelSource, region: _Region, variable: str) -> str:
    """How the host code names a size variable at the launch (host_launch.host_size_name), or SourceError."""
    site, call = region.calls[0]
    name = host_size_name(src, site, call, variable)
    if name is not None:
        return name
    raise SourceError(
        f"the dispatch keys on {variable}, which the host code before the launch at line {src.line(call)} does not "
        f"name: declare a variable {variable} there (e.g. `const int {variable} = ...;`)",
        path=src.model.path,
        line=src.line(call) - 1,
    )


def variant_launch_config(
    src: KernelSource, site: LaunchSite, call: Node, config: Config, variants: Sequence[Variant]
) -> list[str] | None:
    """The grid, block (and shared memory) texts that launch `config`'s variant as it was measured, values
    written in; None when it launches as the original does. HostLaunchError when the host cannot spell it."""
    k = int(config.get(VARIANT, 0))  # type: ignore[arg-type]
    variant = variants[k - 1] if 0 < k <= len(variants) else None
    if variant is None or variant.launch is None:
        return None
    if variant.instantiation and not _runs_instantiation(src, site, call, variant.instantiation):
        return None  # another instantiation: it runs the original body, so it launches as the original
    if site.macro is not None:
        raise HostLaunchError(f"the launch at line {src.line(call)} is inside the macro {site.macro}")
    launch, params = variant.launch, [p.name for p in variant.params]
    return host_config(
        launch,
        site,
        params,
        lambda name: value_text(config[name]),
        functools.partial(host_size_name, src, site, call),
    )


def _runs_instantiation(src: KernelSource, site: LaunchSite, call: Node, at: tuple[tuple[str, str], ...]) -> bool:
    """Whether the launch runs the instantiation a specialised variant was read at (its template arguments, or their
    defaults, are those literals); HostLaunchError where they are not literals, so which one it runs is unknown."""
    params = src.kernel.template_params
    names = [p.name for p in params]
    for name, value in at:
        if name not in names:  # a variant recorded for another version of the kernel
            raise HostLaunchError(f"the variant is read at {name} = {value}, a template parameter the kernel lacks")
        i = names.index(name)
        arg = site.template_args[i] if i < len(site.template_args) else params[i].default
        got = literal_value(arg) if arg is not None else None
        if got is None:
            raise HostLaunchError(
                f"the launch at line {src.line(call)} passes `{arg or 'a deduced argument'}` for {name}, and the "
                f"variant is read at {name} = {value}: which instantiation it runs is not known here"
            )
        if got != literal_value(value):
            return False
    return True


def _chain(
    src: KernelSource, region: _Region, plan: DispatchPlan, space: Space, sizes: Sequence[Mapping[str, int]], note: str
) -> str:
    """The `if` chain, starting at the region's first column (its indentation is already in the file)."""
    data = src.data
    indent = data[data.rfind(b"\n", 0, region.start) + 1 : region.start].decode()
    keys = " and ".join(k for k in (plan.variable, plan.inner_variable) if k is not None)
    rule = f"// A size between tuned ones takes the configuration of the nearest tuned {keys} below it."

    def leaf(config: Config, path: tuple[int, int | None]) -> str:
        served = [s for s in sizes if plan.path_for(s) == path]

        def body(c: Config) -> str:
            return _branch_body(src, region, c, space, _guards(src, region, c, space, served))

        wide = widened(config)
        if wide is None:
            return body(config)
        fits = _extent_guard(src, region)
        if fits is None:
            return body(wide)
        return (
            f"if ({fits}) {{  // every index fits in 32 bits\n{_indented(body(config), '  ')}\n"
            f"}} else {{\n{_indented(body(wide), '  ')}\n}}"
        )

    def outer(i: int, branch: Branch) -> str:
        if not branch.inner or plan.inner_variable is None:
            return leaf(branch.config, (i, None))
        host = _host_name(src, region, plan.inner_variable)
        return _if_chain(branch.inner, host, space, lambda j, b: leaf(b.config, (i, j)), plan.inner_variable)

    chain = _if_chain(plan.branches, _host_name(src, region, plan.variable), space, outer, plan.inner_variable)
    return f"{MARKER} {src.kernel.name}, {note}.\n" + _indented(f"{rule}\n{chain}", indent)


def _if_chain(
    branches: Sequence[Branch], host: str, space: Space, body: Callable[[int, Branch], str], inner: str | None
) -> str:
    """An `if` / `else if` chain on the host variable `host`, one block per branch, from column 0."""
    if len(branches) == 1:
        return body(0, branches[0])
    lines = []
    for i, branch in enumerate(branches):
        upper = branch_upper(branches, i)
        opening = ("if" if i == 0 else "} else if") + f" ({host} < {upper}) {{" if upper is not None else "} else {"
        changed = ", ".join(f"{k}={value_text(v)}" for k, v in branch.config.items() if space.param(k).default != v)
        comment = f"by {inner}" if branch.inner else changed or "the original configuration"
        lines += [f"{opening}  // {comment}", _indented(body(i, branch), "  ")]
    return "\n".join([*lines, "}"])


def _extent_guard(src: KernelSource, region: _Region) -> str | None:
    """The host condition under which every index extent is within the 32-bit limit (in 64-bit arithmetic);
    None where there are none or the host code does not name a size they read."""
    site, call = region.calls[0]
    conditions = []
    for expr in region.extents:
        names: dict[str, str] = {}
        for name in compile_expr(expr).names:
            host = host_size_name(src, site, call, name)
            if host is None:
                return None
            names[name] = f"static_cast<long long>({host})"
        try:
            conditions.append(f"{cxx_expression(expr, names)} <= {NARROW_LIMIT}")
        except HostLaunchError:
            return None
    return " && ".join(dict.fromkeys(conditions)) or None


def _guards(
    src: KernelSource, region: _Region, config: Config, space: Space, served: Sequence[Mapping[str, int]]
) -> list[dict[str, tuple[str, int]]]:
    """The sizes `config` compiles in (SPECIALIZE), one alternative per combination the tuned sizes it
    serves have: template parameter → (the host's name of the size, its value)."""
    specialized = [p for p in space.params if p.binding is Binding.SPECIALIZE and p.arg and config.get(p.name)]
    if not specialized:
        return []
    hosts = {p.arg: _host_name(src, region, p.arg) for p in specialized if p.arg}
    alternatives: list[dict[str, tuple[str, int]]] = []
    for s in served:
        guard = {static_param(p.arg): (hosts[p.arg], s[p.arg]) for p in specialized if p.arg and p.arg in s}
        if guard not in alternatives:
            alternatives.append(guard)
    return alternatives


def _branch_body(
    src: KernelSource, region: _Region, config: Config, space: Space, guards: list[dict[str, tuple[str, int]]]
) -> str:
    """The region with the configuration's values written in; where it compiles sizes in, one launch per
    compiled-in value, guarded by the host's value, and the original for any other value."""
    original = _region_text(src, region, space, space.default(), {})
    if config == space.default():
        return original
    if not guards:
        return _region_text(src, region, space, config, {})
    parts = []
    for i, guard in enumerate(guards):
        condition = " && ".join(f"{host} == {value}" for host, value in guard.values())
        tuned = _region_text(src, region, space, config, {name: value for name, (_, value) in guard.items()})
        parts.append(f"{'if' if i == 0 else '} else if'} ({condition}) {{\n{_indented(tuned, '  ')}")
    return "\n".join(parts) + f"\n}} else {{\n{_indented(original, '  ')}\n}}"


def _region_text(
    src: KernelSource, region: _Region, space: Space, config: Config, specialized: Mapping[str, int]
) -> str:
    """The region's statements, from column 0, with explicit template arguments at each launch and the
    tuning struct's members replaced by the configuration's values (the original's text where nothing
    changes)."""
    data = src.data
    template = {p.name for p in space.params if p.binding is Binding.TEMPLATE} if config != space.default() else set()
    pieces: list[tuple[int, int, str]] = []
    for site, call in region.calls:
        fn = call.child_by_field_name("function")
        assert fn is not None
        tparams = src.kernel.template_params
        explicit = [
            i
            for i, tp in enumerate(tparams)
            if tp.name in specialized or (tp.name in template and i >= len(site.template_args))
        ]
        launch = variant_launch_config(src, site, call, config, region.variants)
        if launch is not None:
            pieces += [(a, b, text) for a, b, text in config_edits(site, launch)]
        if not explicit:
            continue
        named_launch(src, site, call, "dispatch")
        args = []
        for i, tp in enumerate(tparams[: max(explicit) + 1]):
            if tp.name in specialized:
                args.append(str(specialized[tp.name]))
            elif i < len(site.template_args):
                args.append(site.template_args[i])
            elif tp.name in template:
                args.append(value_text(config[tp.name]))
            elif tp.default is not None:
                args.append(tp.default)
            else:
                raise SourceError(
                    f"the launch at line {src.line(call)} leaves template parameter {tp.name} to be deduced; "
                    "write it out to dispatch",
                    path=src.model.path,
                )
        angle = data.find(b"<", fn.start_byte, fn.end_byte)
        callee = data[fn.start_byte : angle if angle >= 0 else fn.end_byte].decode()
        pieces.append((fn.start_byte, fn.end_byte, f"{callee}<{', '.join(args)}>"))
    text = data[region.start : region.end]
    for start, end, new in sorted(pieces, reverse=True):
        text = text[: start - region.start] + new.encode() + text[end - region.start :]
    member = re.compile(rf"(?:\w+::)*{re.escape(src.struct_name)}::(\w+)")

    def value_of(m: re.Match[str]) -> str:
        known = m.group(1) in config and config != space.default()  # the original keeps its names
        return value_text(config[m.group(1)]) if known else m.group(0)

    indent = data[data.rfind(b"\n", 0, region.start) + 1 : region.start].decode()
    lines = member.sub(value_of, text.decode()).split("\n")
    return "\n".join([lines[0], *(line.removeprefix(indent) for line in lines[1:])])


def named_launch(src: KernelSource, site: LaunchSite, call: Node, purpose: str) -> None:
    """SourceError when the launch calls the kernel through a local (`auto kernel = &k<T>;`): writing template
    arguments there would name the local, and the local may carry the kernel's attributes (cudaFuncSetAttribute)."""
    if site.through is not None:
        raise SourceError(
            f"the launch at line {src.line(call)} calls {src.kernel.name} through the local `{site.through}`, so "
            f"template arguments cannot be written there to {purpose}: launch the kernel by its name there, or "
            "apply one configuration for all sizes",
            path=src.model.path,
            line=src.line(call) - 1,
        )


def _indented(text: str, indent: str) -> str:
    """Every non-empty line of `text` (written from column 0) indented by `indent`."""
    return "\n".join(indent + line if line.strip() else "" for line in text.split("\n"))
