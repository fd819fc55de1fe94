"""What a template and its test say about a kernel: typed findings and a short text for prompts and the UI."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cutune.agent.plan import param_owners
from cutune.check import CheckReport, CheckRow
from cutune.gpu.occupancy import Limiter
from cutune.project import KernelContext
from cutune.template.model import Refusal, Space, Template, Value
from cutune.tune.result import SizeResult, TuneResult

UNIMPORTANT_SHARE = 0.05  # a parameter explaining less than this share of the time variance did nothing
LOW_SOL_PCT = 60.0  # below this % of speed of light a size has room left


class FindingKind(enum.Enum):
    """What a finding is about; planners act on kinds, the message is for people."""

    NO_PARAMS = "no_params"  # no recipe made anything explicit
    RECIPE_REFUSED = "recipe_refused"
    SPILLS = "spills"  # registers spilled to local memory (at `values` of `param`, when they are to blame)
    REGISTER_LIMITED = "register_limited"  # registers, not warps, bound the resident blocks
    INFEASIBLE = "infeasible"  # compiled configurations that cannot run, or did not compile
    NO_SIGNIFICANT_GAIN = "no_significant_gain"
    GAIN = "gain"
    LOW_SOL_SMALL_SIZES = "low_sol_small_sizes"  # small sizes far from the floor, large ones near it
    LOW_SOL = "low_sol"  # far from the floor at every size
    PARAM_UNIMPORTANT = "param_unimportant"
    TRIAL_FAILURES = "trial_failures"


@dataclass(frozen=True)
class Finding:
    """One observation; `param`, `values` and `recipe` say what it concerns, where it concerns one."""

    kind: FindingKind
    message: str
    param: str | None = None
    values: tuple[Value, ...] = ()
    recipe: str | None = None


@dataclass(frozen=True)
class ParamInfo:
    """A parameter of the template: its values, the recipe that made it, and its measured importance."""

    name: str
    values: tuple[Value, ...]
    default: Value
    recipe: str | None
    importance: float | None = None  # share of the time variance; None when not tuned


@dataclass(frozen=True)
class Analysis:
    """A compact account of one template and its test, for planners and people."""

    kernel: str
    applied: tuple[str, ...]
    refused: tuple[Refusal, ...]
    params: tuple[ParamInfo, ...]
    findings: tuple[Finding, ...]
    speedup: float | None = None  # over the original, when measured

    def of(self, kind: FindingKind) -> tuple[Finding, ...]:
        """The findings of one kind."""
        return tuple(f for f in self.findings if f.kind is kind)

    def has(self, kind: FindingKind) -> bool:
        """Whether there is a finding of this kind."""
        return any(f.kind is kind for f in self.findings)

    def param(self, name: str) -> ParamInfo | None:
        """The parameter called `name`, if the template has it."""
        return next((p for p in self.params if p.name == name), None)

    def params_of(self, recipe: str) -> tuple[ParamInfo, ...]:
        """The parameters a recipe created."""
        return tuple(p for p in self.params if p.recipe == recipe)

    def render(self) -> str:
        """A short text: recipes, parameters, result, findings."""
        lines = [f"kernel {self.kernel}", f"recipes applied: {', '.join(self.applied) or 'none'}"]
        for p in self.params:
            origin = f", from {p.recipe}" if p.recipe else ""
            importance = f", importance {p.importance:.2f}" if p.importance is not None else ""
            lines.append(f"param {p.name} in {list(p.values)} (default {p.default!r}{origin}{importance})")
        if self.speedup is not None:
            lines.append(f"tuned speedup over the original: {self.speedup:.3f}x")
        lines += [f"- {f.kind.name}{f' ({f.recipe})' if f.recipe else ''}: {f.message}" for f in self.findings]
        return "\n".join(lines)


def analyze(
    ctx: KernelContext,
    template: Template,
    *,
    check: CheckReport | None = None,
    result: TuneResult | None = None,
) -> Analysis:
    """The findings of a template, of its compile-only check and of its tuning result, where given."""
    owners = param_owners(ctx.model, template.kernel, template.applied)
    importances = result.importances if result is not None else {}
    params = tuple(
        ParamInfo(p.name, p.values, p.default, owners.get(p.name), importances.get(p.name))
        for p in template.space.params
    )
    findings = [Finding(FindingKind.RECIPE_REFUSED, r.reason, recipe=r.recipe) for r in template.refused]
    if not params:
        findings.append(Finding(FindingKind.NO_PARAMS, "no recipe made a choice of this kernel explicit"))
    if check is not None:
        findings += _check_findings(check, template.space)
    if result is not None:
        findings += _result_findings(result, params)
    return Analysis(
        template.kernel,
        template.applied,
        template.refused,
        params,
        tuple(findings),
        result.speedup if result is not None else None,
    )


def _check_findings(check: CheckReport, space: Space) -> list[Finding]:
    compiled = [r for r in check.rows if r.usage is not None]
    findings = []
    spilling = [r for r in compiled if r.usage is not None and r.usage.spills]
    if spilling:
        clean = [r for r in compiled if r not in spilling]
        blamed = _blame(spilling, clean, space)
        where = f" at {blamed[0]}={'/'.join(map(str, blamed[1]))}" if blamed else ""
        findings.append(
            Finding(
                FindingKind.SPILLS,
                f"{len(spilling)} of {len(compiled)} compiled configurations spill "
                f"registers{where} (e.g. {spilling[0].config})",
                param=blamed[0] if blamed else None,
                values=blamed[1] if blamed else (),
            )
        )
    running = [r for r in compiled if r.occupancy is not None and r.occupancy.feasible]
    limited = [r for r in running if r.occupancy is not None and r.occupancy.limiter is Limiter.REGISTERS]
    default_limited = bool(check.rows) and check.rows[0] in limited  # check_kernel lists the original first
    if limited and (default_limited or 2 * len(limited) >= len(running)):
        example = limited[0]
        assert example.usage is not None and example.occupancy is not None  # rows in `running` have both
        findings.append(
            Finding(
                FindingKind.REGISTER_LIMITED,
                f"occupancy limited by registers in {len(limited)} of {len(running)} "
                f"runnable configurations (e.g. {example.config}: {example.usage.registers} registers, "
                f"{example.occupancy.occupancy:.0%} occupancy)"
                + (", the original configuration among them" if default_limited else ""),
            )
        )
    failed = [r for r in check.rows if not r.feasible]
    if failed:
        findings.append(
            Finding(
                FindingKind.INFEASIBLE,
                f"{len(failed)} of {len(check.rows)} checked "
                f"configurations cannot run (e.g. {failed[0].config}: {failed[0].problem})",
            )
        )
    return findings


def _blame(bad: Sequence[CheckRow], good: Sequence[CheckRow], space: Space) -> tuple[str, tuple[Value, ...]] | None:
    """The parameter whose values only ever appear in `bad` rows (the fewest such values wins), and the
    values to avoid: those, and any larger candidate when they all lie above every clean value."""
    if not good:
        return None  # with nothing clean to compare against, no value is to blame
    best: tuple[str, tuple[Value, ...]] | None = None
    for name in bad[0].config:
        clean = {r.config[name] for r in good}
        only_bad = {r.config[name] for r in bad} - clean
        # every bad row must carry one of the values, or the parameter does not explain the spills
        if not only_bad or not all(r.config[name] in only_bad for r in bad):
            continue
        if best is None or len(only_bad) < len(best[1]):
            best = (name, tuple(sorted(only_bad, key=_order)))
    if best is None:
        return None
    name, values = best
    candidates = next((p.values for p in space.params if p.name == name), values)
    ints, clean_ints = _ints(values), _ints({r.config[name] for r in good})
    # more threads, items or unrolling need more registers: unsampled larger values would spill too
    if len(ints) == len(values) and clean_ints and min(ints) > max(clean_ints):
        larger = {v for v in _ints(candidates) if v > min(ints)}
        values = tuple(v for v in candidates if v in values or v in larger)
    return name, values


def _ints(values: Iterable[Value]) -> list[int]:
    return [v for v in values if isinstance(v, int) and not isinstance(v, bool)]


def _order(v: Value) -> tuple[str, Value]:
    return (type(v).__name__, v)


def _result_findings(result: TuneResult, params: Sequence[ParamInfo]) -> list[Finding]:
    findings = []
    if result.significant:
        findings.append(Finding(FindingKind.GAIN, f"{result.speedup:.3f}x over the original with {result.best}"))
    else:
        findings.append(
            Finding(
                FindingKind.NO_SIGNIFICANT_GAIN,
                f"no configuration beat the original by more than the run-to-run spread ({result.trials} measured)",
            )
        )
    findings += _sol_findings(result.sizes)
    for p in params:
        if p.importance is not None and len(p.values) > 1 and p.importance < UNIMPORTANT_SHARE:
            findings.append(
                Finding(
                    FindingKind.PARAM_UNIMPORTANT,
                    f"{p.name} explains {p.importance:.1%} of the time variance",
                    param=p.name,
                    recipe=p.recipe,
                )
            )
    if result.failures:
        reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(result.failures.items()))
        findings.append(Finding(FindingKind.TRIAL_FAILURES, f"failed configurations: {reasons}"))
    return findings


def _sol_findings(sizes: Sequence[SizeResult]) -> list[Finding]:
    known = sorted((s for s in sizes if s.pct_of_sol is not None), key=lambda s: s.sol_floor_us or 0.0)
    if not known:
        return []
    low = [s for s in known if (s.pct_of_sol or 0.0) < LOW_SOL_PCT]
    text = ", ".join(f"{_size(s)}: {s.pct_of_sol:.0f}%" for s in known)
    if len(low) == len(known):
        return [Finding(FindingKind.LOW_SOL, f"below {LOW_SOL_PCT:.0f}% of speed of light at every size ({text})")]
    # the floor grows with the bytes moved, so sorting by it puts the small sizes first
    small = known[: max(1, len(known) // 2)]
    if any(s in low for s in small):
        return [Finding(FindingKind.LOW_SOL_SMALL_SIZES, f"small sizes are far from speed of light ({text})")]
    return []


def _size(s: SizeResult) -> str:
    return " ".join(f"{k}={v}" for k, v in s.size.items())
