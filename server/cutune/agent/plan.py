"""A plan: which recipes to apply and which candidate values to search; applying one gives a Template."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cutune.agent.errors import AgentError
from cutune.cuda.model import SourceModel
from cutune.limits import DeviceLimits
from cutune.template.expr import compile_expr
from cutune.template.model import Space, Template, TunableParam, Value
from cutune.template.recipes import RECIPES
from cutune.template.templatize import templatize

MAX_VALUES = 32  # candidate values per parameter: more makes the search sample too sparsely
# device limits an integer flag must respect, by the flag's format (0 turns the flag off)
FLAG_LIMITS = {"-maxrregcount={}": "max_regs_per_thread"}


@dataclass(frozen=True)
class Plan:
    """Recipes (registry names, in registry order) and candidate values replacing the recipes' own."""

    recipes: tuple[str, ...]
    params: tuple[tuple[str, tuple[Value, ...]], ...] = ()  # sorted by name; hashable, so plans compare
    reason: str = ""
    done: bool = False  # the planner proposes no further change

    def __post_init__(self) -> None:
        if not self.recipes:
            raise AgentError("a plan needs at least one recipe")
        unknown = [r for r in self.recipes if r not in RECIPES]
        if unknown:
            raise AgentError(f"unknown recipe(s) {', '.join(unknown)}; known: {', '.join(RECIPES)}")
        for name, values in self.params:
            if not values:
                raise AgentError(f"the plan gives {name} no candidate values")

    @classmethod
    def of(
        cls,
        recipes: Sequence[str],
        params: Mapping[str, Sequence[Value]] | None = None,
        *,
        reason: str = "",
        done: bool = False,
    ) -> Plan:
        """A plan with recipes put in registry order (duplicates dropped) and values de-duplicated."""
        order = {name: i for i, name in enumerate(RECIPES)}
        chosen = sorted(dict.fromkeys(recipes), key=lambda r: order.get(r, len(order)))
        values = tuple(sorted((k, tuple(dict.fromkeys(v))) for k, v in (params or {}).items()))
        return cls(tuple(chosen), values, reason, done)

    def values(self, name: str) -> tuple[Value, ...] | None:
        """The candidate values the plan sets for `name`, or None when it keeps the recipe's."""
        return next((v for k, v in self.params if k == name), None)

    def same_as(self, other: Plan) -> bool:
        """Whether two plans ask for the same template (reasons and `done` aside)."""
        return (self.recipes, self.params) == (other.recipes, other.params)

    def describe(self) -> str:
        """One line: the recipes and the values set."""
        values = "; ".join(f"{k}={list(v)}" for k, v in self.params)
        return f"recipes [{', '.join(self.recipes)}]" + (f", values {values}" if values else "")


def apply_plan(model: SourceModel, kernel: str, plan: Plan, limits: DeviceLimits) -> Template:
    """Templatize with the plan's recipes, then replace candidate values; AgentError if a value is invalid."""
    template = templatize(model, kernel, recipes=plan.recipes)
    by_name = {p.name: p for p in template.space.params}
    for name, _ in plan.params:
        if name not in by_name:
            known = ", ".join(by_name) or "none"
            raise AgentError(
                f"the plan sets values for {name}, which recipes [{', '.join(plan.recipes)}] do "
                f"not create on {kernel} (their parameters: {known})"
            )
    params = tuple(_with_values(p, plan.values(p.name), template.space, limits) for p in template.space.params)
    return dataclasses.replace(template, space=Space(params, template.space.constraints))


def param_owners(model: SourceModel, kernel: str, recipes: Sequence[str]) -> dict[str, str]:
    """Which recipe created each parameter: templatize recipe by recipe and see what each one adds."""
    owners: dict[str, str] = {}
    ordered = [r for r in RECIPES if r in recipes]
    for i, recipe in enumerate(ordered):
        for p in templatize(model, kernel, recipes=ordered[: i + 1]).space.params:
            owners.setdefault(p.name, recipe)
    return owners


def _with_values(
    param: TunableParam, values: tuple[Value, ...] | None, space: Space, limits: DeviceLimits
) -> TunableParam:
    """`param` with `values` after checking them against its type, default and single-parameter rules."""
    if values is None:
        return param
    name = param.name
    if len(values) > MAX_VALUES:
        raise AgentError(f"{name}: {len(values)} candidate values; at most {MAX_VALUES} keep the search useful")
    kind = type(param.default)  # exact types: a bool is also an int in Python, and 1.0 is not 1
    wrong = [v for v in values if type(v) is not kind]
    if wrong:
        raise AgentError(
            f"{name} takes {kind.__name__} values (default {param.default!r}); not {', '.join(repr(v) for v in wrong)}"
        )
    if param.default not in values:
        raise AgentError(
            f"{name}: the candidate values {list(values)} must include the default "
            f"{param.default!r} (the original kernel's choice)"
        )
    if isinstance(param.default, str):
        return dataclasses.replace(param, values=values)
    numbers = sorted(v for v in values if not isinstance(v, str))
    negative = [v for v in numbers if v < 0]
    if negative:
        raise AgentError(f"{name}: negative values {negative} (counts, widths and flags are never negative)")
    limit_names = limits.as_names()
    bound = FLAG_LIMITS.get(param.flag or "")
    if bound is not None and (over := [v for v in numbers if v > limit_names[bound]]):
        raise AgentError(f"{name}: {over} exceed {bound} = {limit_names[bound]} on {limits.arch}")
    for text in space.constraints:
        rule = compile_expr(text)
        if name not in rule.names or not rule.names <= {name, *limit_names}:
            continue  # constraints on other parameters or problem sizes are checked by the search
        broken = [v for v in numbers if not rule.evaluate({**limit_names, name: v})]
        if broken:
            raise AgentError(f"{name}: {', '.join(map(repr, broken))} break the constraint {text!r} on {limits.arch}")
    return dataclasses.replace(param, values=tuple(numbers))
