"""The row_reduce transform on the RMSNorm samples, measured on the GPU through the real tune pipeline.

    python benchmarks/row_reduce.py OUT_DIR [--seconds 100] [--trials 150] [--min-time-ms 5] [--compile-workers 12]
        [--only rms_norm]

For each sample: templatize, add the row_reduce variant (no hand edit: the transform writes it), search
(variant, configuration) pairs with Optuna in the isolated worker (inputs fresh and random, outputs
NaN-poisoned and checked against the original, L2 flushed), re-check the finalists on fresh inputs, run the
winners under compute-sanitizer, re-measure them interleaved with the original, and record per size the
original and tuned times, speedup, % of the speed-of-light floor and the configuration launched.

Writes, after each sample (so a run cut short keeps what it finished): OUT_DIR/row_reduce.<device>.<date>.md,
each TuneResult JSON, and `<sample>.trials.md`: every configuration the search measured, with its per-size
times and % of the floor, or why it failed.
"""

from __future__ import annotations

import argparse
import datetime
import math
from dataclasses import replace
from pathlib import Path

from cutune.gpu.backend import Job, TimingOptions
from cutune.gpu.registry import create_backend
from cutune.project import open_kernel, tune_options
from cutune.spec import KernelSpec
from cutune.template.model import Space
from cutune.template.variants import with_variants
from cutune.template.variants.row_reduce import RowReduce
from cutune.tune.result import TuneResult, write_result
from cutune.tune.run import tune
from cutune.tune.study import load_study, read_record

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = {"rms_norm": "rms_norm_kernel", "fused_add_rms_norm": "fused_add_rms_norm_kernel"}


def main() -> None:
    """Tune the samples with their row_reduce variant and write the tables."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--seconds", type=float, default=100.0, help="search time per sample")
    ap.add_argument("--trials", type=int, default=150)
    ap.add_argument("--min-time-ms", type=float, default=5.0, help="kernel time measured per size and trial")
    ap.add_argument("--compile-workers", type=int, default=12, help="threads compiling configurations ahead")
    ap.add_argument("--only", choices=sorted(SAMPLES), action="append", help="these samples (default: both)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tables: list[str] = []
    for stem in args.only or SAMPLES:
        kernel = SAMPLES[stem]
        ctx = open_kernel(ROOT / "samples" / f"{stem}.cu", kernel)
        spec = ctx.require_spec()
        variant = RowReduce().apply(ctx.template_model, kernel, spec)
        template, combined = with_variants(ctx.template_model, kernel, [variant], spec, base=ctx.template)
        assert combined is not None
        # the transform's own constraints, while VARIANT = 1 runs (with_variants does not carry them yet)
        space = Space(
            template.space.params,
            (*template.space.constraints, *(f"VARIANT != 1 or ({c})" for c in variant.constraints)),
        )
        timing = TimingOptions(min_time_ms=args.min_time_ms)
        job = Job(str(ctx.path), template, combined, space, timing=timing)
        options = replace(tune_options(ctx, trials=args.trials, seconds=None), workspace=args.out / "work" / stem)
        options = replace(options, budget=replace(options.budget, search_seconds=args.seconds))  # the search's
        result = tune(job, create_backend("cupy", compile_workers=args.compile_workers), options)
        write_result(result, args.out / f"{stem}.row_reduce.result.json")
        tables.append(_table(f"{stem}.cu", result))
        print(tables[-1], flush=True)
        _write_summary(args.out, result, tables, args)
        (args.out / f"{stem}.trials.md").write_text(_trials(stem, options.storage(), result, combined))


def _write_summary(out: Path, result: TuneResult, tables: list[str], args: argparse.Namespace) -> None:
    device = result.device.replace(" ", "-")
    date = datetime.datetime.now(datetime.UTC).date().isoformat()
    lines = [
        f"# row_reduce on {result.device}, {date}",
        "",
        f"Measured with `python benchmarks/row_reduce.py OUT --seconds {args.seconds:g} --trials {args.trials} "
        f"--min-time-ms {args.min_time_ms:g}` (the tune pipeline: L2 flushed before each launch, every candidate "
        "checked against the original on fresh inputs with outputs NaN-poisoned, finalists re-checked on three "
        "more input sets and run under compute-sanitizer, winners re-measured interleaved with the original). "
        "Floor = fewest bytes / measured copy bandwidth + one empty launch.",
        "",
        *tables,
    ]
    (out / f"row_reduce.{device}.{date}.md").write_text("\n".join(lines) + "\n")


def _table(file: str, result: TuneResult) -> str:
    rows = [
        f"## {file} ({result.trials} configurations, {result.search_seconds:.0f} s search, "
        f"failures {dict(result.failures) or 'none'})",
        "",
        "| size | floor µs | original µs | original % of floor | tuned µs | speedup | % of floor | configuration |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in result.sizes:
        size = ", ".join(f"{k}={v}" for k, v in s.size.items())
        floor = s.sol_floor_us or 0.0
        rows.append(
            f"| {size} | {floor:.2f} | {s.original.median_us:.2f} | {_pct(floor, s.original.median_us)} | "
            f"{s.tuned.median_us:.2f} | {s.speedup:.2f}× | {_pct(floor, s.tuned.median_us)} | {s.best_config} |"
        )
    geomean = math.exp(sum(math.log(s.speedup) for s in result.sizes) / len(result.sizes))
    rows += ["", f"geomean speedup {geomean:.2f}×; worst size {min(s.speedup for s in result.sizes):.2f}×", ""]
    return "\n".join(rows)


def _pct(floor: float, us: float) -> str:
    return f"{100 * floor / us:.0f}%" if floor > 0 and us > 0 else "?"


def _trials(stem: str, storage: str, result: TuneResult, spec: KernelSpec) -> str:
    """Every measured configuration of the study: per-size medians (and % of the floor), or its failure."""
    floors = {tuple(s.size.items()): s.sol_floor_us or 0.0 for s in result.sizes}
    records = [r for t in load_study(storage, result.study).trials if (r := read_record(t)) is not None]
    ok = sorted((r for r in records if r.ok), key=lambda r: r.objective or 0.0)
    sizes = [", ".join(f"{v}" for v in s.values()) for s in spec.sizes]
    lines = [
        f"# {stem}: every configuration measured ({result.device}), best first; µs (% of floor) per size",
        "",
        "| objective | configuration | regs | " + " | ".join(sizes) + " |",
        "|---" * (3 + len(sizes)) + "|",
    ]
    for r in ok:
        cells = [f"{t.median_us:.1f} ({_pct(floors.get(tuple(t.size.items()), 0.0), t.median_us)})" for t in r.timings]
        regs = r.compile.registers if r.compile is not None else "?"
        lines.append(f"| {r.objective:.3f} | {r.config} | {regs} | " + " | ".join(cells) + " |")
    lines += ["", "## failed", ""]
    lines += [
        f"- {r.config}: {r.failure.value if r.failure else '?'}: {r.detail}" for r in records if not r.ok and r.measured
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
