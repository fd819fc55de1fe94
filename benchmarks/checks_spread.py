"""Why a selection round's ratio spreads 0.09–0.22 at few-µs sizes with the correctness checks on (0.003–0.008
off): each hypothesis from the code, tested by changing one thing, the spreads side by side.

    python -m benchmarks.checks_spread OUT_DIR [--only silu_and_mul] [--rounds 5]

The measurement is the selection's own: `measure_rounds` (A c1 A c2 A, rotated) of the original against two
configurations of the sample, on a fresh backend per variant, then per size the p10–p90 width of each
candidate's per-round ratio and the original's own noise (`original_noise`). Hypotheses (what differs
between the modes in cutune/gpu/cupy_backend.py and harness.py):

- host gaps: with an L2 flush the timer did not hold the GPU while the host enqueued a chunk of
  repetitions, trusting the memset to keep the GPU behind the host; when the host stalls (more Python
  objects and garbage collection with the checks' arrays, compile threads holding the GIL), event pairs
  time the GPU waiting for the launch. Variants `old timer` (no hold with a flush) against the fix (hold).
- guard regions: with checks, every timed array sits between 64 KiB guards (placement, alignment, pages).
  Variant `no guards`: checks on, guard bytes 0.
- garbage collection during timing: variant `gc off`: the collector disabled around each evaluation.
- the ragged problems: with checks, extra problems (checked, never timed) are allocated and run before
  each timing. Variant `no ragged`.

Writes OUT_DIR/checks_spread.<device>.<date>.json and .md: per variant and size ≤ 10 µs, the spreads.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.reports import new_report, write_report

from cutune.gpu import cupy_backend
from cutune.gpu.backend import Measurement, TimingOptions
from cutune.gpu.cupy_backend import CupyBackend
from cutune.project import build_job, open_kernel
from cutune.template.model import Config
from cutune.tune.select import measure_rounds, original_noise

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = {
    "silu_and_mul": "silu_and_mul_kernel",
    "rms_norm": "rms_norm_kernel",
    "gated_activation": "act_and_mul_kernel",
}
SMALL_US = 10.0  # the sizes the finding is about


@contextlib.contextmanager
def patched(module: Any, name: str, value: Any) -> Iterator[None]:
    """`module.name = value` for the block."""
    kept = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, kept)


class GcOff(CupyBackend):
    """The CuPy backend with the garbage collector off during each evaluation."""

    def evaluate(self, config: Config, at: Sequence[int] | None = None) -> Measurement:
        gc.disable()
        try:
            return super().evaluate(config, at)
        finally:
            gc.enable()


VARIANTS: dict[str, tuple[bool, bool, Callable[[], contextlib.AbstractContextManager[None]]]] = {
    # name: (checks, queue ahead, other change)
    "checks off, old timer": (False, False, contextlib.nullcontext),
    "checks on, old timer": (True, False, contextlib.nullcontext),
    "checks off": (False, True, contextlib.nullcontext),
    "checks on": (True, True, contextlib.nullcontext),
    "checks on, old timer, no guards": (True, False, lambda: patched(cupy_backend, "GUARD_BYTES", 0)),
    "checks on, old timer, no ragged": (True, False, lambda: patched(cupy_backend, "ragged_sizes", lambda _s: ())),
    "checks on, old timer, gc off": (True, False, contextlib.nullcontext),
}


def candidates_of(space_default: Config, params: dict[str, tuple[Any, ...]]) -> list[Config]:
    """Two configurations that change one parameter each (the last value of the first two parameters)."""
    out = []
    for name, values in list(params.items())[:2]:
        other = next((v for v in reversed(values) if v != space_default[name]), None)
        if other is not None:
            out.append(Config.of({**space_default, name: other}))
    return out


def run_variant(sample: str, variant: str, rounds: int) -> dict[str, Any]:
    """One fresh backend in this variant: the selection's rounds, and the spreads per size."""
    checks, queue_ahead, change = VARIANTS[variant]
    ctx = open_kernel(ROOT / "samples" / f"{sample}.cu", SAMPLES[sample])
    job = build_job(ctx, timing=TimingOptions())
    original = job.space.default()
    others = candidates_of(original, {p.name: p.values for p in job.space.params})
    backend_type = GcOff if variant.endswith("gc off") else CupyBackend
    with change():
        backend = backend_type(checks=checks)
        try:
            backend.open(job)
            assert backend._timer is not None
            backend._timer.queue_ahead = queue_ahead
            measured = measure_rounds(backend, original, others, rounds)
        finally:
            backend.close()
    assert measured is not None
    noise = original_noise(measured)
    sizes = []
    for i, timing in enumerate(measured.original_timings):
        sizes.append(
            {
                "size": timing.size,
                "original_us": timing.median_us,
                "original_noise": noise[i],
                "ratio_spreads": [c.per_size[i].spread for c in measured.contenders],
                "ratios": [c.per_size[i].ratio for c in measured.contenders],
            }
        )
    return {"variant": variant, "checks": checks, "queue_ahead": queue_ahead, "sizes": sizes}


def markdown(report: dict[str, Any]) -> str:
    """Per sample: a row per variant, the largest ratio spread and the original's noise at each small size."""
    lines = [f"# Checks-on timing spread, diagnosed ({report['device']}, {report['date']})", ""]
    for sample, runs in report["samples"].items():
        small = [s["size"] for s in runs[0]["sizes"] if s["original_us"] <= SMALL_US]
        head = " | ".join(", ".join(f"{k}={v}" for k, v in size.items()) for size in small)
        lines += [f"## {sample}: largest ratio p10–p90 / original noise, sizes ≤ {SMALL_US:g} µs", ""]
        lines += [f"| variant | {head} |", "|---" * (len(small) + 1) + "|"]
        for run in runs:
            cells = [
                f"{max(s['ratio_spreads'], default=0):.3f} / {s['original_noise']:.4f}"
                for s in run["sizes"]
                if s["size"] in small
            ]
            lines.append(f"| {run['variant']} | {' | '.join(cells)} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Every variant on each sample, the report written."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", default="silu_and_mul")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--variants", default=";".join(VARIANTS), help="names separated by `;` (names hold commas)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report = new_report()
    for sample in args.only.split(","):
        runs = []
        for variant in args.variants.split(";"):
            runs.append(run_variant(sample, variant, args.rounds))
            small = [s for s in runs[-1]["sizes"] if s["original_us"] <= SMALL_US]
            spreads = ", ".join(f"{max(s['ratio_spreads'], default=0):.3f}" for s in small)
            print(f"{sample} [{variant}]: ratio spreads at sizes <= {SMALL_US:g} us: {spreads}", flush=True)
        report["samples"][sample] = runs
    write_report(args.out, "checks_spread", report, markdown(report))


if __name__ == "__main__":
    main()
