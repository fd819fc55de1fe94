"""The kernels of a file, their launch sites and tunable literals: a table, or JSON for scripts."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.table import Table
from rich.text import Text

from cutune.cli_render.output import user_text
from cutune.cuda.model import LaunchSite, SourceModel, TunableLiteral
from cutune.template.recipes.vector_width import NOT_TUNED


def render_kernels(model: SourceModel, title: str) -> Table:
    """One row per kernel: its line, template parameters, launch lines and tunable literals."""
    launches, literals = _by_kernel(model)
    table = Table(title=user_text(title))
    for col in ("kernel", "line", "template params", "launch sites", "tunable literals"):
        table.add_column(col)
    for k in model.kernels:
        table.add_row(
            Text.assemble(k.name, (" (parse errors)", "yellow") if k.has_errors else ""),
            str(k.span.start.line + 1),
            ", ".join(tp.name for tp in k.template_params) or "-",
            ", ".join(str(s.span.start.line + 1) for s in launches[k.name]) or "-",
            ", ".join(_literal(lit) for lit in literals[k.name]) or "-",
        )
    return table


def kernels_json(model: SourceModel) -> dict[str, Any]:
    """The kernels as plain data, with 1-based lines."""
    launches, literals = _by_kernel(model)
    return {
        "path": model.path,
        "kernels": [
            {
                "name": k.name,
                "namespace": k.namespace,
                "line": k.span.start.line + 1,
                "template_params": [tp.name for tp in k.template_params],
                "launch_lines": [s.span.start.line + 1 for s in launches[k.name]],
                "tunable_literals": [
                    {"kind": lit.kind.value, "name": lit.name, "value": lit.value, "line": lit.span.start.line + 1}
                    for lit in literals[k.name]
                ],
                "parse_errors": k.has_errors,
            }
            for k in model.kernels
        ],
        "issues": [{"line": i.span.start.line + 1, "message": i.message} for i in model.issues],
    }


def _by_kernel(model: SourceModel) -> tuple[dict[str, list[LaunchSite]], dict[str, list[TunableLiteral]]]:
    """Launch sites and literals grouped by kernel in one pass (per-kernel lookups are quadratic on big files)."""
    launches: dict[str, list[LaunchSite]] = defaultdict(list)
    for site in model.launches:
        launches[site.kernel].append(site)
    literals: dict[str, list[TunableLiteral]] = defaultdict(list)
    for lit in model.literals:
        if lit.kernel is not None:
            literals[lit.kernel].append(lit)
    return launches, literals


def _literal(lit: TunableLiteral) -> str:
    untuned = " (not tuned by templatize)" if lit.kind in NOT_TUNED else ""
    return f"{lit.kind.value}{'(' + lit.name + ')' if lit.name else ''}={lit.value}{untuned}"
