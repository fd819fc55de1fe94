"""The search space as Optuna sees it, and which of its points can run at all."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from optuna.distributions import CategoricalDistribution

from cutune.errors import CutuneError
from cutune.limits import DeviceLimits
from cutune.spec import KernelSpec
from cutune.template.expr import Number, compile_expr
from cutune.template.model import Config, Space
from cutune.template.recipes.index_bits import EXTENT

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

    def violation(self, config: Config) -> str | None:
        """Why `config` cannot run (the first rule it breaks and the problem size), or None."""
        params = {k: v for k, v in config.items() if not isinstance(v, str)}
        for size in self._spec.sizes:
            extent = {EXTENT: self._spec.index_extent(size)} if self._extent else {}
            why = self._check({**self._limit_names, **size, **extent, **params})
            if why is not None:
                return f"{why} (at {', '.join(f'{k}={v}' for k, v in size.items())})"
        return None

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


def feasible_configs(
    space: Space, spec: KernelSpec, limits: DeviceLimits, budget: int = ENUMERATION_LIMIT
) -> tuple[Config, ...] | None:
    """Every feasible configuration when the space has at most `budget` points, else None."""
    if space.size() > budget:
        return None
    check = Feasibility(space, spec, limits)
    names = [p.name for p in space.params]
    points = (
        Config.of(dict(zip(names, values, strict=True)))
        for values in itertools.product(*(p.values for p in space.params))
    )
    return tuple(c for c in points if check.violation(c) is None)


def neighbours(config: Config, space: Space) -> list[Config]:
    """The configurations one step from `config`: one parameter moved to the candidate value before or after its own."""
    found: list[Config] = []
    for p in space.params:
        if config.get(p.name) not in p.values:
            continue
        i = p.values.index(config[p.name])
        found += [Config.of({**config, p.name: p.values[j]}) for j in (i - 1, i + 1) if 0 <= j < len(p.values)]
    return found
