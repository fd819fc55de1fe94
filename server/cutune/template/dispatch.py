"""A per-size dispatch: which configuration each range of one or two size variables launches.

The rule (stated in the report and in the written code): the dispatch keys on the size variable with the
most distinct values among the tuned sizes (the first such); where that leaves tuned sizes sharing a value,
a second variable splits that range (the one that then tells most of them apart). A size takes the
configuration of the nearest tuned value at or below it on each key variable; a size below every tuned
one takes the smallest's. Tuned sizes the key cannot tell apart share one configuration: the original,
unless one configuration won at all of them. So every tuned size launches what was measured there. Where a
held-out size between two tuned ones showed the lower one's configuration no faster than the original,
the original takes over from that held-out size up to the next tuned value. Other size variables do not
take part; a configuration that compiles a size in (SPECIALIZE) is guarded by that size's value too.
A branch that runs a structural variant (VARIANT = k) launches it with the variant's own grid and block,
spelled at the launch by `variants.host_launch` with the branch's values written in.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tree_sitter import Node

from cutune.cuda.model import LaunchSite
from cutune.errors import SourceError
from cutune.template.edits import EditList
from cutune.template.model import Binding, Config, Space
from cutune.template.recipes.base import KernelSource
from cutune.template.recipes.specialize import static_param
from cutune.template.tuning import value_text
from cutune.template.variants.combine import VARIANT
from cutune.template.variants.host_launch import HostLaunchError, config_edits, host_config, host_size_name
from cutune.template.variants.model import Variant


@dataclass(frozen=True)
class Branch:
    """Sizes from `lower` (inclusive; None: from the smallest) up to the next branch launch `config`. Where
    `inner` splits the range on the plan's second variable, its branches decide and `config` is the
    original (what the range launches where the split is dropped)."""

    lower: int | None
    config: Config
    inner: tuple[Branch, ...] = ()

    def same_launch(self, other: Branch) -> bool:
        """Whether both branches launch the same over their ranges (neighbours that do are one range)."""
        return self.config == other.config and self.inner == other.inner


def _index(branches: Sequence[Branch], value: int) -> int:
    """The index of the branch whose range holds `value` (the first below every lower bound)."""
    return max((i for i, b in enumerate(branches) if b.lower is None or value >= b.lower), default=0)


def _upper(branches: Sequence[Branch], i: int) -> int | None:
    return branches[i + 1].lower if i + 1 < len(branches) else None


def _merged(branches: Sequence[Branch]) -> tuple[Branch, ...]:
    """`branches` with each one that launches the same as the one before folded into it."""
    merged: list[Branch] = []
    for b in branches:
        if not merged or not merged[-1].same_launch(b):
            merged.append(b)
    return tuple(merged)


@dataclass(frozen=True)
class DispatchPlan:
    """Ranges of `variable` (each maybe split on `inner_variable`) and what each launches, in increasing order."""

    variable: str
    branches: tuple[Branch, ...]
    inner_variable: str | None = None

    def path_for(self, size: Mapping[str, int]) -> tuple[int, int | None]:
        """The index of the branch serving `size`, and of the inner branch within it (None: not split)."""
        i = _index(self.branches, size[self.variable])
        inner = self.branches[i].inner
        if not inner or self.inner_variable is None:
            return i, None
        return i, _index(inner, size[self.inner_variable])

    def branch_for(self, size: Mapping[str, int]) -> Branch:
        """The innermost branch that serves `size`."""
        i, j = self.path_for(size)
        return self.branches[i] if j is None else self.branches[i].inner[j]

    def config_for(self, size: Mapping[str, int]) -> Config:
        """The configuration the dispatch launches at `size`."""
        return self.branch_for(size).config

    def ranges(self) -> list[tuple[str, Config]]:
        """Each range in words (`256 ≤ num_tokens < 2048, hidden_size < 8192`) and what it launches."""
        found = []
        for i, b in enumerate(self.branches):
            outer = range_text(self.variable, b.lower, _upper(self.branches, i))
            if not b.inner or self.inner_variable is None:
                found.append((outer, b.config))
                continue
            for j, c in enumerate(b.inner):
                found.append((f"{outer}, {range_text(self.inner_variable, c.lower, _upper(b.inner, j))}", c.config))
        return found

    @property
    def configs(self) -> tuple[Config, ...]:
        """The distinct configurations launched, in branch order."""
        return tuple(dict.fromkeys(config for _, config in self.ranges()))

    def with_configs(self, change: Callable[[Config], Config]) -> DispatchPlan:
        """The plan with `change` applied to every configuration (ranges that then launch the same merged)."""

        def changed(b: Branch) -> Branch:
            inner = _merged([changed(c) for c in b.inner])
            if len(inner) == 1:  # the split no longer matters
                return Branch(b.lower, inner[0].config)
            return Branch(b.lower, change(b.config), inner)

        return DispatchPlan(self.variable, _merged([changed(b) for b in self.branches]), self.inner_variable)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""

        def branch(b: Branch) -> dict[str, Any]:
            data: dict[str, Any] = {"lower": b.lower, "config": dict(b.config)}
            if b.inner:
                data["inner"] = [branch(c) for c in b.inner]
            return data

        data: dict[str, Any] = {"variable": self.variable, "branches": [branch(b) for b in self.branches]}
        if self.inner_variable is not None:
            data["inner_variable"] = self.inner_variable
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DispatchPlan:
        """The inverse of `to_dict`."""

        def branch(b: Mapping[str, Any]) -> Branch:
            return Branch(b["lower"], Config.of(b["config"]), tuple(branch(c) for c in b.get("inner", ())))

        return cls(data["variable"], tuple(branch(b) for b in data["branches"]), data.get("inner_variable"))


def range_text(variable: str, lower: int | None, upper: int | None) -> str:
    """`256 ≤ num_tokens < 2048`, `num_tokens < 256`, `every num_tokens`."""
    low = f"{lower} ≤ " if lower is not None else ""
    high = f" < {upper}" if upper is not None else ""
    return f"{low}{variable}{high}" if low or high else f"every {variable}"


def dispatch_key(sizes: Sequence[Mapping[str, int]]) -> tuple[str, ...]:
    """The size variables a dispatch keys on: the one with the most distinct values (the first such), and a
    second one where the first leaves tuned sizes sharing a value and a second tells more of them apart."""
    names = list(sizes[0])

    def distinct(*key: str) -> int:
        return len({tuple(s[n] for n in key) for s in sizes})

    outer = max(names, key=distinct)
    if distinct(outer) == distinct(*names) or len(names) == 1:
        return (outer,)
    inner = max((n for n in names if n != outer), key=lambda n: distinct(outer, n))
    return (outer, inner) if distinct(outer, inner) > distinct(outer) else (outer,)


def dispatch_variable(sizes: Sequence[Mapping[str, int]]) -> str:
    """The size variable a dispatch's ranges are on (the first of `dispatch_key`)."""
    return dispatch_key(sizes)[0]


def plan_dispatch(
    sizes: Sequence[Mapping[str, int]],
    chosen: Sequence[Config],
    original: Config,
    *,
    slower_from: Mapping[int, int] | None = None,
) -> DispatchPlan:
    """The dispatch over the tuned `sizes` launching `chosen[i]` at `sizes[i]` (or, where the key cannot
    tell sizes apart, one configuration they share: the original unless the same one won at all of them).

    `slower_from` maps a tuned size's index to a held-out value of the dispatch variable above it from
    which its configuration was no faster than the original: the original takes over there.
    """
    key = dispatch_key(sizes)
    variable, inner = key[0], key[1] if len(key) > 1 else None

    def cell(i: int) -> int | None:
        return sizes[i][inner] if inner is not None else None

    cells: dict[int | None, Config] = {}
    points: list[tuple[int, dict[int | None, Config]]] = []  # a lower bound, and what each cell launches from it
    for value in sorted({s[variable] for s in sizes}):
        group = [i for i, s in enumerate(sizes) if s[variable] == value]
        cells = {}
        for c in dict.fromkeys(cell(i) for i in group):
            configs = {chosen[i] for i in group if cell(i) == c}
            cells[c] = configs.pop() if len(configs) == 1 else original
        points.append((value, cells))
        cuts: dict[int, list[int]] = {}
        for i in group:
            if (cut := (slower_from or {}).get(i)) is not None:
                cuts.setdefault(cut, []).append(i)
        for cut in sorted(cuts):
            cells = {**cells, **{cell(i): original for i in cuts[cut]}}
            points.append((cut, cells))
    branches = []
    for rank, (value, cells) in enumerate(points):
        lower = None if rank == 0 else value
        order = sorted(cells, key=lambda c: c or 0)
        split = _merged([Branch(None if k == 0 else c, cells[c]) for k, c in enumerate(order)])
        branches.append(Branch(lower, split[0].config) if len(split) == 1 else Branch(lower, original, split))
    return DispatchPlan(variable, _merged(branches), inner if any(b.inner for b in branches) else None)


def _held_out(
    sizes: Sequence[Mapping[str, int]], multiple_of: Mapping[str, int]
) -> tuple[list[tuple[int, dict[str, int]]], list[str]]:
    """The held-out sizes (see `held_out_sizes`), and the ranges between tuned values where none fits."""
    variable = dispatch_variable(sizes)
    values = sorted({s[variable] for s in sizes})
    found, missed = [], []
    for a, b in itertools.pairwise(values):
        if b - a < 2:
            continue  # nothing in between
        middle = next(
            (
                m
                # a multiple both share keeps the kernel's divisibility; else the spec's declared one
                for step in (math.gcd(a, b) or 1, multiple_of.get(variable, 1))
                if a < (m := math.isqrt(a * b) // step * step) < b
            ),
            None,
        )
        if middle is None:
            missed.append(f"{a} < {variable} < {b}")
            continue
        # every tuned size at the lower value, with its other variables: each range of a split is checked
        found += [(i, {**s, variable: middle}) for i, s in enumerate(sizes) if s[variable] == a]
    return found, missed


def held_out_sizes(
    sizes: Sequence[Mapping[str, int]], multiple_of: Mapping[str, int]
) -> list[tuple[int, dict[str, int]]]:
    """Sizes between consecutive tuned values of the dispatch variable, to check the rule where it was not
    tuned: the geometric middle, rounded down to a multiple both neighbours share, with the other variables
    of each tuned size at the lower value (the one whose configuration the rule launches there), and its index."""
    return _held_out(sizes, multiple_of)[0]


def unchecked_ranges(
    plan: DispatchPlan, sizes: Sequence[Mapping[str, int]], multiple_of: Mapping[str, int]
) -> tuple[str, ...]:
    """The ranges between tuned sizes that no held-out size checks, in words: gaps on the dispatch variable
    where no held-out value fits, and gaps on the second variable inside a range that it splits."""
    missed = _held_out(sizes, multiple_of)[1]
    if plan.inner_variable is not None:
        inner = plan.inner_variable
        for i, b in enumerate(plan.branches):
            if not b.inner:
                continue
            upper = _upper(plan.branches, i)
            # the tuned values the range's split comes from: those in it, or the nearest below it
            values = sorted({s[plan.variable] for s in sizes})
            base = values[0] if b.lower is None else max(v for v in values if v <= b.lower)
            tuned = sorted(
                {s[inner] for s in sizes if base <= s[plan.variable] and (upper is None or s[plan.variable] < upper)}
            )
            where = range_text(plan.variable, b.lower, upper)
            missed += [f"{c} < {inner} < {d} where {where}" for c, d in itertools.pairwise(tuned) if d - c > 1]
    return tuple(missed)


MARKER = "// cutune: per-size configurations of"


@dataclass(frozen=True)
class _Region:
    """Host statements to repeat per branch: from the first that reads the tuning struct to the launch."""

    start: int
    end: int
    calls: tuple[tuple[LaunchSite, Node], ...]
    variants: tuple[Variant, ...] = ()  # the combined template's structural variants (VARIANT = 1, 2, ...)


def dispatch_edits(
    src: KernelSource,
    edits: EditList,
    plan: DispatchPlan,
    space: Space,
    sizes: Sequence[Mapping[str, int]],
    note: str,
    variants: Sequence[Variant] = (),
) -> None:
    """Replace each launch of the kernel by an `if` chain on the plan's variable, one branch per range;
    a branch that runs a structural variant (VARIANT = k, `variants[k - 1]`) launches with its grid and block."""
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
        region = _Region(start, end, tuple(calls), tuple(variants))
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
        return _branch_body(src, region, config, space, _guards(src, region, config, space, served))

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
        upper = _upper(branches, i)
        opening = ("if" if i == 0 else "} else if") + f" ({host} < {upper}) {{" if upper is not None else "} else {"
        changed = ", ".join(f"{k}={value_text(v)}" for k, v in branch.config.items() if space.param(k).default != v)
        comment = f"by {inner}" if branch.inner else changed or "the original configuration"
        lines += [f"{opening}  // {comment}", _indented(body(i, branch), "  ")]
    return "\n".join([*lines, "}"])


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


def _indented(text: str, indent: str) -> str:
    """Every non-empty line of `text` (written from column 0) indented by `indent`."""
    return "\n".join(indent + line if line.strip() else "" for line in text.split("\n"))
