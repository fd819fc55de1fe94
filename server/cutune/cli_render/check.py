"""A compile-only check report as a table for the terminal, or as JSON for scripts."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from cutune.check import CheckReport, CheckRow
from cutune.cli_render.output import user_text


def check_title(report: CheckReport) -> str:
    """What was compiled, for which target, and how much of the space: nothing ran on any GPU."""
    title = (
        f"{report.kernel} compiled for {report.arch} (compile-only): {len(report.rows)} of "
        f"{report.space_size} configurations"
    )
    if report.skipped_infeasible:
        title += f"; {report.skipped_infeasible} more broke a constraint or limit before compiling"
    if report.spec_drafted:
        title += " (no spec: a drafted one was used)"
    return title


def render_check(report: CheckReport) -> Table:
    """A table: one column per parameter, then threads, registers, spills, shared memory, occupancy."""
    params = list(report.rows[0].config) if report.rows else []
    t = Table(title=user_text(check_title(report)))
    t.add_column("#", justify="right", no_wrap=True)
    for name in params:
        t.add_column(user_text(name), justify="right", overflow="fold")
    for col in ("threads", "regs", "spill B", "smem B", "occupancy", "blocks/SM", "limit"):
        t.add_column(col, justify="right")
    t.add_column("feasible", overflow="fold")
    for i, r in enumerate(report.rows):
        u = r.usage
        o = r.occupancy if r.occupancy is not None and r.occupancy.feasible else None
        t.add_row(
            "original" if i == 0 else str(i),
            *(Text(str(r.config[n]), style="bold" if i == 0 else "") for n in params),
            str(r.threads) if r.threads is not None else "-",
            str(u.registers) if u else "-",
            str(u.spill_store_bytes + u.spill_load_bytes) if u else "-",
            str(u.shared_bytes) if u else "-",
            f"{o.occupancy:.0%}" if o else "-",
            str(o.blocks_per_sm) if o else "-",
            o.limiter.value if o else "-",
            _verdict(r, original=i == 0),
        )
    return t


def check_json(report: CheckReport) -> dict[str, Any]:
    """The report as plain data: one entry per configuration, the original first."""
    return {
        "kernel": report.kernel,
        "arch": report.arch,
        "compile_only": True,
        "space_size": report.space_size,
        "skipped_infeasible": report.skipped_infeasible,
        "spec_drafted": report.spec_drafted,
        "configurations": [_row_json(r, original=i == 0) for i, r in enumerate(report.rows)],
    }


def failure_summary(report: CheckReport) -> str | None:
    """Why every configuration failed, when every one did (the original's reason, which the others share
    most often); None when at least one is feasible."""
    if not report.rows or any(r.feasible for r in report.rows):
        return None
    return f"every configuration failed; the original: {report.rows[0].problem}"


def _verdict(row: CheckRow, *, original: bool) -> Text:
    if row.feasible:
        return Text.assemble(("yes", "green"), " (original)" if original else "")
    return Text.assemble(("no", "red"), f": {row.problem}")


def _row_json(row: CheckRow, *, original: bool) -> dict[str, Any]:
    u = row.usage
    o = row.occupancy if row.occupancy is not None and row.occupancy.feasible else None
    return {
        "original": original,
        "config": dict(row.config.items()),
        "feasible": row.feasible,
        "problem": row.problem,
        "threads": row.threads,
        "registers": u.registers if u else None,
        "spill_bytes": u.spill_store_bytes + u.spill_load_bytes if u else None,
        "shared_bytes": u.shared_bytes if u else None,
        "occupancy": o.occupancy if o else None,
        "blocks_per_sm": o.blocks_per_sm if o else None,
        "limiter": o.limiter.value if o else None,
    }
