"""The search space as Optuna sees it, and which of its points can run at all."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Mapping

from optuna.distributions import CategoricalDistribution

from cutune.errors import CutuneError
from cutune.limits import DeviceLimits
from cutune.spec import KernelSpec
from cutune.template.expr import Expr, Number, compile_expr
from cutune.template.instantiate import size_value
from cutune.template.model import Binding, Config, Space, Value
from cutune.template.recipes.index_bits import EXTENT
from cutune.template.variants.combine import VARIANT

ENUMERATION_LIMIT = 10_000  # points; beyond this the feasible set is not listed up front
# CUDA's per-dimension block limits, the same on every architecture cutune targets
_MAX_BLOCK_DIMS = (1024, 1024, 64)


def distributions(space: Space) -> dict[str, CategoricalDistribution]:
    """One categorical distribution per parameter, over its candidate values."""
    return {p.name: CategoricalDistribution(p.values) for p in space.params}


class Feasibility:
    """Decides whether a configuration can run: spec constraints and hardware limits, at every size (a rule
    may also read `index_extent`, the largest index the arguments span there: `KernelSpec.index_extent`)."""

    def __init__(self, space: Space, spec: KernelSpec, limits: DeviceLimits) -> None:
        self.space = space
        self._spec = spec
        self._limits = limits
        self._limit_names = limits.as_names()
        texts = dict.fromkeys((*space.constraints, *spec.constraints))  # both may list the same one
        self._constraints = tuple(compile_expr(t) for t in texts)
        self._extent = any(EXTENT in c.names for c in self._constraints)  # computed only where a rule reads it
        self._unspecialisable = dict(_unspecialisable(space, spec))

    def violation(self, config: Config) -> str | None:
        """Why `config` cannot run (the first rule it breaks and the problem size), or None."""
        for name, reason in self._unspecialisable.items():
            if config.get(name) is True:
                return reason
        params = {k: v for k, v in config.items() if not isinstance(v, str)}
        for size in self._spec.sizes:
            extent = {EXTENT: self._spec.index_extent(size)} if self._extent else {}
            why = self._check({**self._limit_names, **size, **extent, **params})
            if why is not None:
                return f"{why} (at {', '.join(f'{k}={v}' for k, v in size.items())})"
        return None

    def pinned(self, name: str) -> dict[Value, frozenset[str]]:
        """For each value of the parameter `name`, the parameters a constraint of just the two holds at their
        defaults while `name` takes it (`VARIANT == 2 or ITEMS == 2`: a variant's own parameters where another runs)."""
        params = {p.name: p for p in self.space.params}
        mine = _numbers(params[name].values) if name in params else None
        if mine is None:
            return {}
        held: dict[Value, set[str]] = {v: set() for v in mine}
        for c in self._constraints:
            others = c.names - {name}
            other = params.get(next(iter(others))) if name in c.names and len(others) == 1 else None
            theirs = _numbers(other.values) if other is not None else None
            if other is None or theirs is None or not isinstance(other.default, int):
                continue
            for v in mine:
                ok = {x: _holds(c, {name: v, other.name: x}) for x in theirs}
                if ok.get(other.default) and not any(ok[x] for x in theirs if x != other.default):
                    held[v].add(other.name)
        return {v: frozenset(names) for v, names in held.items()}

    @functools.cached_property
    def groups(self) -> tuple[tuple[tuple[Value, ...], ...], ...]:
        """The space as the values each parameter may take, one group per VARIANT value with its pinned parameters
        at their defaults (the whole space as one group where there are no variants): every point the constraints
        could let through, in far fewer than the product's."""
        pins = self.pinned(VARIANT)
        return tuple(
            tuple(
                (v,) if p.name == VARIANT else (p.default,) if p.name in held else p.values for p in self.space.params
            )
            for v, held in pins.items()
        ) or (tuple(p.values for p in self.space.params),)

    def group_sizes(self) -> list[int]:
        """How many points each group holds."""
        return [math.prod(len(values) for values in group) for group in self.groups]

    def size(self) -> int:
        """How many points the groups hold."""
        return sum(self.group_sizes())

    def points(self, group: int | None = None) -> Iterator[Config]:
        """The groups' points (or one group's), feasible or not, each group in the order of its product."""
        names = [p.name for p in self.space.params]
        chosen = self.groups if group is None else (self.groups[group],)
        for values in (v for g in chosen for v in itertools.product(*g)):
            yield Config.of(dict(zip(names, values, strict=True)))

    def listed(self, budget: int = ENUMERATION_LIMIT) -> tuple[Config, ...] | None:
        """Every feasible configuration (in the order of the space's product) when the groups hold at most `budget`
        points, else None: a variant's own parameters are tried only where it runs."""
        if self.size() > budget:
            return None
        found = [c for c in self.points() if self.violation(c) is None]
        found.sort(key=lambda c: tuple(p.values.index(c[p.name]) for p in self.space.params))
        return tuple(found)

    def _check(self, names: Mapping[str, Number]) -> str | None:
        try:
            for constraint in self._constraints:
                if not constraint.evaluate(names):
                    return f"constraint {constraint.text!r} does not hold"
            _, block, shared = self._spec.launch(names)
        except CutuneError as e:  # e.g. a division by zero or a zero-sized block for this config
            return str(e)
        threads = block[0] * block[1] * block[2]
        if threads > self._limits.max_threads_per_block:
            return f"{threads} threads per block exceed {self._limits.max_threads_per_block}"
        for axis, dim, most in zip("xyz", block, _MAX_BLOCK_DIMS, strict=True):
            if dim > most:
                return f"block.{axis} = {dim} exceeds {most}"
        # the opt-in maximum: a backend may raise a kernel's dynamic shared memory limit up to it
        if shared > self._limits.max_smem_per_block_optin:
            return f"{shared} bytes of shared memory exceed {self._limits.max_smem_per_block_optin}"
        return None


def _unspecialisable(space: Space, spec: KernelSpec) -> list[tuple[str, str]]:
    """The SPECIALIZE parameters whose size cannot be compiled in at some problem size (it is 0 there, say), and why."""
    found = []
    for p in space.params:
        if p.binding is not Binding.SPECIALIZE or p.arg is None:
            continue
        try:
            for size in spec.sizes:
                size_value(spec, p, size)
        except (CutuneError, ArithmeticError) as e:  # a size expression dividing by zero there: nothing to compile in
            found.append((p.name, str(e)))
    return found


def _holds(constraint: Expr, names: Mapping[str, Number]) -> bool:
    """Whether the constraint holds for `names` (not where it cannot be evaluated: a division by zero)."""
    try:
        return bool(constraint.evaluate(names))
    except (CutuneError, ArithmeticError):
        return False


def _numbers(values: tuple[Value, ...]) -> tuple[int, ...] | None:
    """The values as integers (bools included), or None when one is not."""
    numbers = tuple(v for v in values if isinstance(v, int))
    return numbers if len(numbers) == len(values) else None


def feasible_configs(
    space: Space, spec: KernelSpec, limits: DeviceLimits, budget: int = ENUMERATION_LIMIT
) -> tuple[Config, ...] | None:
    """Every feasible configuration when there are at most `budget` points to try, else None (Feasibility.listed)."""
    return Feasibility(space, spec, limits).listed(budget)


def neighbours(config: Config, space: Space) -> list[Config]:
    """The configurations one step from `config`: one parameter moved to the candidate value before or after its own."""
    found: list[Config] = []
    for p in space.params:
        if config.get(p.name) not in p.values:
            continue
        i = p.values.index(config[p.name])
        found += [Config.of({**config, p.name: p.values[j]}) for j in (i - 1, i + 1) if 0 <= j < len(p.values)]
    return found
