"""A capture log and the specs it gave, as tables."""

from __future__ import annotations

from rich.table import Table

from cutune.capture.demangle import demangle
from cutune.capture.log import CaptureLog
from cutune.capture.run import SpecOutcome
from cutune.cli_render.output import user_text


def render_log(log: CaptureLog) -> Table:
    """One row per distinct launch: kernel (demangled), geometry, arguments read, and launch count."""
    names = demangle(launch.name for launch in log.launches)
    where = " ".join(x for x in (log.device, log.date) if x)
    table = Table(title=user_text(f"{log.path or 'capture'}: {len(log.launches)} distinct launches ({where})"))
    for col in ("kernel", "grid", "block", "smem", "arguments", "launches"):
        table.add_column(col, justify="right" if col in ("smem", "launches") else "left")
    for launch in sorted(log.launches, key=lambda x: (names[x.name], -x.count)):
        args = "not read: " + (launch.why or "?") if launch.params is None else f"{len(launch.params)} read"
        table.add_row(
            user_text(names[launch.name].removeprefix("void ")),
            "×".join(map(str, launch.grid)),
            "×".join(map(str, launch.block)),
            str(launch.smem),
            args + (" + data" if launch.data else ""),
            str(launch.count),
        )
    table.caption = f"{sum(x.count for x in log.launches)} launches in all; command: {user_text(' '.join(log.command))}"
    return table


def render_specs(outcome: SpecOutcome) -> Table:
    """One row per captured kernel: its spec file, problems, launches, and where its inputs came from."""
    table = Table(title="specs from the capture")
    for col in ("kernel", "spec", "sizes", "launches", "inputs"):
        table.add_column(col, justify="right" if col in ("sizes", "launches") else "left")
    for k in outcome.kernels:
        real = sorted({arg for inputs in k.real_inputs.values() for arg in inputs})
        table.add_row(
            k.kernel,
            user_text(str(k.path.with_suffix(".tune.toml"))),
            str(len(k.spec.sizes)),
            str(k.launches),
            f"real: {', '.join(real)}" if real else "random (run with --data for the program's own)",
        )
    return table
