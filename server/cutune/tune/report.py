"""A tuning result as a rich table for the terminal."""

from __future__ import annotations

from rich.table import Table

from cutune.template.model import Config
from cutune.tune.result import TuneResult


def _size(size: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in size.items())


def _config_change(config: Config, original: Config) -> str:
    changed = Config.of({k: v for k, v in config.items() if original.get(k) != v})
    return "original" if not changed else str(changed)


def render_result(result: TuneResult) -> Table:
    """One row per problem size: original and tuned times, speedup, % of speed of light, best here."""
    table = Table(title=f"{result.kernel} on {result.device} ({result.arch})", title_justify="left")
    table.add_column("size")
    table.add_column("original µs", justify="right")
    table.add_column("tuned µs", justify="right")
    table.add_column("speedup", justify="right")
    table.add_column("% SOL", justify="right")
    table.add_column("best for this size")
    for s in result.sizes:
        pct = s.pct_of_sol
        best_here = _config_change(s.best_config, result.original)
        if s.best_config != result.best:
            best_here += f" ({s.original.median_us / s.best_timing.median_us:.2f}×)"
        table.add_row(
            _size(s.size),
            f"{s.original.median_us:.2f}",
            f"{s.tuned.median_us:.2f}",
            f"{s.speedup:.2f}×",
            "–" if pct is None else f"{pct:.0f}%",
            best_here,
        )
    if result.significant:
        verdict = f"best: {_config_change(result.best, result.original)} — {result.speedup:.2f}× (geomean)"
    else:
        verdict = "no significant gain over the original: keeping it"
    failures = ", ".join(f"{n} {reason}" for reason, n in sorted(result.failures.items())) or "none"
    lines = [
        verdict,
        f"{result.trials} configurations measured in {result.search_seconds:.0f} s "
        f"({result.sampler}, stopped: {result.stop}); failed: {failures}",
    ]
    if result.importances:
        lines.append("importance: " + ", ".join(f"{k} {v:.0%}" for k, v in result.importances.items()))
    table.caption = "\n".join(lines)
    table.caption_justify = "left"
    return table
