"""A tuning result as a rich table for the terminal: per size, the dispatch against the original."""

from __future__ import annotations

from rich.table import Table

from cutune.template.model import Config
from cutune.tune.dispatch import DispatchPlan
from cutune.tune.result import SizeResult, TuneResult

_TIMING_WORDS = {
    "events": "events around single launches, L2 flushed before each",
    "graph": "CUDA graphs of back-to-back launches over rotated inputs (time per launch)",
}


def size_text(size: dict[str, int]) -> str:
    """`num_tokens=16, d=4096`."""
    return ", ".join(f"{k}={v}" for k, v in size.items())


def config_change(config: Config, original: Config) -> str:
    """The parameters of `config` that differ from the original, or `original`."""
    changed = Config.of({k: v for k, v in config.items() if original.get(k) != v})
    return "original" if not changed else str(changed)


def dispatch_text(plan: DispatchPlan, original: Config) -> str:
    """`num_tokens < 256: BLOCK=64 · 256 ≤ num_tokens < 2048: original · 2048 ≤ num_tokens: BLOCK=512`."""
    return " · ".join(f"{where}: {config_change(config, original)}" for where, config in plan.ranges())


def render_result(result: TuneResult) -> Table:
    """One row per problem size (held-out ones marked): times, speedup, % of speed of light, what runs."""
    table = Table(title=f"{result.kernel} {result.measured_on()} ({result.arch})", title_justify="left")
    for name, justify in (
        ("size", "left"),
        ("weight", "right"),
        ("original µs", "right"),
        ("tuned µs", "right"),
        ("speedup", "right"),
        ("% SOL", "right"),
        ("launched here", "left"),
        ("single best", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for s in (*result.sizes, *result.held_out):
        table.add_row(*_row(s, result.original))
    table.caption = "\n".join(_caption(result))
    table.caption_justify = "left"
    return table


def _row(s: SizeResult, original: Config) -> list[str]:
    pct = s.pct_of_sol
    single = s.single_speedup
    return [
        size_text(s.size) + (" (held out)" if s.held_out else ""),
        "–" if s.held_out else f"{s.weight:g}",
        f"{s.original.median_us:.2f}",
        f"{s.tuned.median_us:.2f}",
        f"{s.speedup:.2f}×",
        "–" if pct is None else f"{pct:.0f}%",
        config_change(s.best_config, original),
        "–" if single is None else f"{single:.2f}×",
    ]


def _caption(result: TuneResult) -> list[str]:
    lines = []
    weighted = "weighted geomean" if any(s.weight != 1 for s in result.sizes) else "geomean"
    if result.stop == "cancelled":  # the search was cut short: selection, which earns a verdict, never ran
        lines.append("stopped before any configuration was verified: no verdict")
    elif result.significant:
        lines.append(f"per size: {result.speedup:.2f}× ({weighted} over {len(result.sizes)} sizes)")
    else:
        lines.append("no significant gain over the original at any size: keeping it")
    if result.single is not None and result.single_speedup is not None:
        gain = result.gain_over_single or 1.0
        lines.append(
            f"single best configuration ({config_change(result.single, result.original)}) at every size: "
            f"{result.single_speedup:.2f}×; per-size choice gains {gain:.2f}× over it"
        )
    if result.dispatch is not None and len(result.dispatch.configs) > 1:
        lines.append(f"dispatch: {dispatch_text(result.dispatch, result.original)}")
        keys = " and ".join(k for k in (result.dispatch.variable, result.dispatch.inner_variable) if k is not None)
        lines.append(
            f"  (a size between tuned ones takes the configuration of the nearest tuned {keys} below it; "
            "held-out sizes where that was not faster fall back to the original)"
        )
        if result.unchecked:
            lines.append(f"  not checked by a held-out size: {'; '.join(result.unchecked)}")
    if result.per_file:
        cost = (result.per_file_cost - 1.0) * 100
        lines.append(
            f"compile flags (and PDL's launch attribute) apply to the whole file, so they are chosen once "
            f"({result.per_file}); "
            f"choosing them per size would have been {cost:.1f}% faster"
        )
    if result.held_out_note:
        lines.append(f"held-out sizes: {result.held_out_note}")
    if result.search_estimate is not None and result.rounds[1]:
        lines.append(
            f"the search's estimate was {result.search_estimate:.2f}× (one measurement per configuration); the "
            f"figures above come from {result.rounds[1]} interleaved rounds that did not select the winners"
        )
    lines.extend(_check_lines(result))
    failures = ", ".join(f"{n} {reason}" for reason, n in sorted(result.failures.items())) or "none"
    lines.append(
        f"{result.trials} configurations measured in {result.search_seconds:.0f} s{_shared(result)} "
        f"({result.sampler}, stopped: {result.stop}); failed: {failures}"
    )
    if result.phases:
        lines.append("wall time: " + ", ".join(f"{name} {s:.1f} s" for name, s in result.phases.items()))
    lines.append(f"timing: {_TIMING_WORDS.get(result.timing, result.timing)}")
    if result.importances:
        lines.append("importance: " + ", ".join(f"{k} {v:.0%}" for k, v in result.importances.items()))
    return lines


def _shared(result: TuneResult) -> str:
    """Which of the study's configurations this run measured, where others measured some too."""
    if result.own_trials is None:
        return f", resuming {result.resumed_trials} measured by earlier runs" if result.resumed_trials else ""
    at_once = result.trials - result.own_trials - result.resumed_trials
    if not result.resumed_trials and at_once <= 0:
        return ""
    others = [f"{result.resumed_trials} by earlier runs"] if result.resumed_trials else []
    others += [f"{at_once} by other workers at the same time"] if at_once > 0 else []
    return f", {result.own_trials} of them by this run, {' and '.join(others)}"


def _check_lines(result: TuneResult) -> list[str]:
    """What was checked besides the spec sizes, and the finalists the last checks dropped, by class."""
    lines = []
    if result.replayed is not None:  # the checks ran (or not) when the recording was made, with its own spec
        lines.append("correctness: replayed verdicts, as checked by the run that made the recording")
        return lines
    if result.checks:
        lines.append(f"correctness: every configuration against the original at every spec size; {result.checks}")
    for stage, classes in result.rejected.items():
        counts = ", ".join(f"{n} {failure}" for failure, n in sorted(classes.items()))
        lines.append(f"finalists rejected by the {stage}: {counts}")
    if not result.rejected and result.rounds != (0, 0):
        lines.append("no finalist was rejected by the re-checks on fresh inputs or the sanitizer")
    return lines
