"""The built-in planner: a few rules read from the analysis; it never needs a network.

Rules, in order, each starting from the last plan:
- first step: every recipe in the registry;
- recipes that refused (and applied nowhere) leave the plan (cleanup, not a change on its own);
- with no significant gain, recipes whose parameters all explained almost none of the time leave it;
- far from speed of light (at small sizes, or everywhere): keep or add the more-work-per-thread
  recipes and offer one more doubling of their integer values;
- spills blamed on some values of a parameter: drop those values (the default stays);
- occupancy limited by registers: add the recipes that bound registers per thread;
- nothing changed: `done`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cutune.agent.analysis import Analysis, FindingKind
from cutune.agent.history import Step
from cutune.agent.plan import Plan
from cutune.agent.planner import Planner
from cutune.template.model import Value
from cutune.template.recipes import RECIPES

WORK_RECIPES = ("items_per_thread", "specialize")  # more work per thread, sizes fixed at compile time
# bound the registers per thread (MIN_BLOCKS, -maxrregcount), trading them for occupancy
REGISTER_RECIPES = ("launch_bounds", "compile_flags")
WIDEST = 16  # the largest value the widening rule offers (items per thread beyond this rarely pay)


@dataclass
class _Edit:
    """The plan being built: recipes, value overrides, and why each change was made."""

    recipes: list[str]
    params: dict[str, tuple[Value, ...]]
    reasons: list[str] = field(default_factory=list)

    def drop(self, recipe: str, analysis: Analysis) -> None:
        self.recipes.remove(recipe)
        for p in analysis.params_of(recipe):
            self.params.pop(p.name, None)

    def add(self, recipes: Sequence[str], analysis: Analysis) -> list[str]:
        """Add the registered recipes not in the plan and not refused last time; the ones added."""
        refused = {r.recipe for r in analysis.refused} - set(analysis.applied)
        added = [r for r in recipes if r in RECIPES and r not in self.recipes and r not in refused]
        self.recipes += added
        return added


class BuiltinPlanner(Planner):
    """Rule-based planning from the analysis findings (see the module docstring)."""

    name = "builtin"

    def propose(self, analysis: Analysis, history: Sequence[Step]) -> Plan:
        """The next plan by the rules; `done` when none of them changes the last plan."""
        if not history:
            return Plan.of(tuple(RECIPES), reason="first step: every recipe")
        last = history[-1].plan
        edit = _Edit(list(last.recipes), dict(last.params))
        for r in {r.recipe for r in analysis.refused} - set(analysis.applied):
            if r in edit.recipes:
                edit.drop(r, analysis)
        far_from_floor = analysis.has(FindingKind.LOW_SOL_SMALL_SIZES) or analysis.has(FindingKind.LOW_SOL)
        _drop_unimportant(analysis, edit, keep=WORK_RECIPES if far_from_floor else ())
        if far_from_floor:
            _more_work(analysis, edit)
        _avoid_spills(analysis, edit)
        if analysis.has(FindingKind.REGISTER_LIMITED):
            added = edit.add(REGISTER_RECIPES, analysis)
            if added:
                edit.reasons.append(f"occupancy is limited by registers: add {', '.join(added)}")
        plan = Plan.of(edit.recipes, edit.params, reason="; ".join(edit.reasons))
        if not edit.reasons or plan.same_as(last):
            return Plan.of(edit.recipes, edit.params, reason="no rule proposes a change", done=True)
        return plan


def _drop_unimportant(analysis: Analysis, edit: _Edit, *, keep: Sequence[str]) -> None:
    """Without a significant gain, drop recipes whose every parameter was unimportant (never the last)."""
    if not analysis.has(FindingKind.NO_SIGNIFICANT_GAIN):
        return
    unimportant = {f.param for f in analysis.of(FindingKind.PARAM_UNIMPORTANT)}
    for recipe in analysis.applied:
        params = analysis.params_of(recipe)
        if recipe in keep or recipe not in edit.recipes or len(edit.recipes) == 1:
            continue
        if params and all(p.name in unimportant for p in params):
            edit.drop(recipe, analysis)
            edit.reasons.append(f"drop {recipe}: {', '.join(p.name for p in params)} changed nothing measurable")


def _more_work(analysis: Analysis, edit: _Edit) -> None:
    """Keep or add the work-per-thread recipes and offer the next doubling of their values."""
    added = edit.add(WORK_RECIPES, analysis)
    if added:
        edit.reasons.append(f"far from speed of light: add {', '.join(added)}")
    for recipe in WORK_RECIPES:
        for p in analysis.params_of(recipe):
            ints = [v for v in p.values if isinstance(v, int) and not isinstance(v, bool)]
            if not ints or max(ints) * 2 > WIDEST:
                continue
            edit.params[p.name] = (*p.values, max(ints) * 2)
            edit.reasons.append(f"far from speed of light: offer {p.name}={max(ints) * 2}")


def _avoid_spills(analysis: Analysis, edit: _Edit) -> None:
    """Drop the values the analysis blames for spills; the default always stays."""
    for finding in analysis.of(FindingKind.SPILLS):
        p = analysis.param(finding.param) if finding.param is not None else None
        if p is None or not finding.values:
            continue
        kept = tuple(v for v in p.values if v == p.default or v not in finding.values)
        if kept != p.values:
            edit.params[p.name] = kept
            dropped = [v for v in p.values if v not in kept]
            edit.reasons.append(f"spills at {p.name}={'/'.join(map(str, finding.values))}: drop {dropped}")
