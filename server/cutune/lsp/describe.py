"""Words for the editor: a stored result as a lens title, a diagnostic, hover and Markdown."""

from __future__ import annotations

import statistics

from cutune.cuda.model import LiteralKind, TunableLiteral
from cutune.template.model import Config, TunableParam, Value
from cutune.template.recipes.vector_width import NOT_TUNED
from cutune.template.tuning import value_text
from cutune.tune.result import TuneResult

_LITERALS = {
    LiteralKind.LAUNCH_DIM: "launch dimension `{name}` fixed at {value}",  # `dim3 block(256)` before the launch
    LiteralKind.LAUNCH_BOUNDS: "launch bounds fixed at {value}",
    LiteralKind.PRAGMA_UNROLL: "unroll factor fixed at {value}",
    LiteralKind.VECTOR_WIDTH: "vector width fixed at {value} bytes",
    LiteralKind.DEFINE: "`{name}` fixed at {value}",
    LiteralKind.CONSTEXPR: "`{name}` fixed at {value}",
    LiteralKind.TEMPLATE_ARG: "template argument `{name}` fixed at {value}",
}

_LAUNCH_SLOTS = (
    "grid size fixed at {value}",
    "threads per block fixed at {value}",
    "dynamic shared memory fixed at {value} bytes",
    "stream fixed at {value}",
)


def device_short(device: str) -> str:
    """`NVIDIA H200` → `H200`: lenses are narrow."""
    return device.removeprefix("NVIDIA ").strip() or device


def pct_of_sol(result: TuneResult) -> float | None:
    """The tuned time as % of speed of light, geometric mean over sizes; None where any is unknown."""
    values = [s.pct_of_sol for s in result.sizes]
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return statistics.geometric_mean(v for v in values if v is not None)


def changes(result: TuneResult) -> Config:
    """The parameters whose tuned value differs from the original."""
    return Config.of({k: v for k, v in result.best.items() if result.original.get(k) != v})


def where(result: TuneResult) -> str:
    """`H200`, or `replayed from <recording> (<device>, <date>)`: replayed numbers always say so."""
    return result.replayed.label() if result.replayed is not None else device_short(result.device)


def per_size(result: TuneResult) -> bool:
    """Whether the result launches different configurations at different sizes."""
    return result.dispatch is not None and len(result.dispatch.configs) > 1


def gain(result: TuneResult) -> str:
    """`1.84× faster · 91% of speed-of-light · H200`, or why there is no gain."""
    if not result.significant:
        return f"no significant gain over the original · {where(result)}"
    sol = pct_of_sol(result)
    speedup = f"{result.speedup:.2f}× faster" + (" (per size)" if per_size(result) else "")
    return " · ".join([speedup, *([f"{sol:.0f}% of speed-of-light"] if sol else []), where(result)])


def lens_title(result: TuneResult, stale: bool, applied: bool) -> str:
    """The result lens of a kernel: what tuning found, whether it is applied, or that the source changed."""
    if stale:
        return f"⚠ stale result ({gain(result)}): the source changed since it was tuned · Autotune"
    if not result.significant:
        return gain(result)
    return f"⚡ {gain(result)} · " + ("applied ✓" if applied else "Apply")


def result_message(result: TuneResult, stale: bool) -> str:
    """The result diagnostic: speedup, best parameters and device."""
    tuned = changes(result)
    params = ", ".join(f"{k}={value_text(v)} (was {value_text(result.original[k])})" for k, v in tuned.items())
    text = f"cutune: {gain(result)}" + (f" with {params}" if params and result.significant else "")
    text += f" — {result.trials} configurations " + (
        result.replayed.label() if result.replayed is not None else f"on {result.device}, {result.date[:10]}"
    )
    return ("stale: the source changed since this was tuned; autotune again. " + text) if stale else text


def literal_message(literal: TunableLiteral, launch_slot: int | None) -> str:
    """The hint on a hard-coded tunable literal; `launch_slot` says which `<<<...>>>` expression holds it."""
    template = _LAUNCH_SLOTS[launch_slot] if launch_slot is not None else _LITERALS[literal.kind]
    todo = NOT_TUNED.get(literal.kind, "templatize to tune")
    return f"{template.format(name=literal.name or '', value=literal.value)} — {todo}"


def param_markdown(param: TunableParam, result: TuneResult | None, stale: bool) -> str:
    """Hover text of a tunable parameter: candidates, the tuned value and its importance."""
    lines = [f"**{param.name}** — {param.description}" if param.description else f"**{param.name}**"]
    lines.append(f"candidates: {', '.join(_value(v, param.default) for v in param.values)}")
    note = " (stale: the source changed since)" if stale else ""
    if result is not None and per_size(result) and param.name in result.best:
        values = " · ".join(f"{_size(s.size)}: **{value_text(s.best_config[param.name])}**" for s in result.sizes)
        lines.append(f"tuned per size {_on(result)}{note}: {values}")
    elif result is not None and param.name in result.best:
        lines.append(f"tuned: **{value_text(result.best[param.name])}** {_on(result)}{note}")
    if result is not None and param.name in result.importances:
        lines.append(f"importance: {result.importances[param.name]:.0%} of the time's variance")
    return "\n\n".join(lines)


def _value(value: Value, default: Value) -> str:
    return f"{value_text(value)} (original)" if value == default else value_text(value)


def _on(result: TuneResult) -> str:
    return result.replayed.label() if result.replayed is not None else f"on {result.device}"


def _size(size: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in size.items())


def _config(config: Config, original: Config) -> str:
    changed = ", ".join(f"{k}={value_text(v)}" for k, v in config.items() if original.get(k) != v)
    return changed or "original"


def result_markdown(result: TuneResult, stale: bool) -> str:
    """A result as Markdown: the verdict, one row per problem size (held-out ones too), the single best,
    the dispatch rule, importances."""
    lines = [f"### {result.kernel} {result.measured_on()} ({result.arch})", "", result_message(result, stale), ""]
    lines += [
        "| size | weight | original µs | tuned µs | speedup | % of floor | configuration |",
        "|---|--:|--:|--:|--:|--:|---|",
    ]
    for s in (*result.sizes, *result.held_out):
        size = _size(s.size) + (" (held out)" if s.held_out else "")
        sol = "–" if s.pct_of_sol is None else f"{s.pct_of_sol:.0f}%"
        lines.append(
            f"| {size} | {'–' if s.held_out else f'{s.weight:g}'} | {s.original.median_us:.2f} | "
            f"{s.tuned.median_us:.2f} | {s.speedup:.2f}× | {sol} | {_config(s.best_config, result.original)} |"
        )
    single = result.single_speedup
    if result.single is not None and single is not None:
        lines += [
            "",
            f"single best configuration at every size ({_config(result.single, result.original)}): "
            f"{single:.2f}×; per-size choice: {result.speedup:.2f}× ({result.gain_over_single or 1.0:.2f}× over it)",
        ]
    if per_size(result) and result.dispatch is not None:
        lines += [
            "",
            f"dispatch on `{result.dispatch.variable}`: a size between tuned ones takes the configuration of the "
            "nearest tuned size below it; held-out sizes where that was not faster fall back to the original",
        ]
    if result.per_file:
        lines += [
            "",
            f"compile flags (and PDL's launch attribute) apply to the whole file and are chosen once "
            f"({result.per_file}): "
            f"{(result.per_file_cost - 1) * 100:.1f}% given up against per-size flags",
        ]
    if result.importances:
        lines += ["", "importance: " + ", ".join(f"{k} {v:.0%}" for k, v in result.importances.items())]
    return "\n".join(lines)
