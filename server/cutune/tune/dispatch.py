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
`apply/dispatch.py` writes the plan into the host code.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cutune.template.model import Config


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


def branch_upper(branches: Sequence[Branch], i: int) -> int | None:
    """The exclusive upper bound of branch `i`: the next branch's lower bound (None for the last)."""
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
            outer = range_text(self.variable, b.lower, branch_upper(self.branches, i))
            if not b.inner or self.inner_variable is None:
                found.append((outer, b.config))
                continue
            for j, c in enumerate(b.inner):
                found.append(
                    (f"{outer}, {range_text(self.inner_variable, c.lower, branch_upper(b.inner, j))}", c.config)
                )
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
            upper = branch_upper(plan.branches, i)
            # the tuned values the range's split comes from: those in it, or the nearest below it
            values = sorted({s[plan.variable] for s in sizes})
            base = values[0] if b.lower is None else max(v for v in values if v <= b.lower)
            tuned = sorted(
                {s[inner] for s in sizes if base <= s[plan.variable] and (upper is None or s[plan.variable] < upper)}
            )
            where = range_text(plan.variable, b.lower, upper)
            missed += [f"{c} < {inner} < {d} where {where}" for c, d in itertools.pairwise(tuned) if d - c > 1]
    return tuple(missed)
