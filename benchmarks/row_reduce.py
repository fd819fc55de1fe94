"""The row_reduce transform on the RMSNorm samples, measured on the GPU through the real tune pipeline.

    python benchmarks/row_reduce.py OUT_DIR [--seconds 100] [--trials 80]

For each sample: templatize, add the row_reduce variant (no hand edit: the transform writes it), search
(variant, configuration) pairs with Optuna in the isolated worker (inputs fresh and random, outputs
NaN-poisoned and checked against the original, L2 flushed), re-measure the winners interleaved with the
original, and record per size the original and tuned times, speedup, % of the speed-of-light floor and
the configuration launched. Writes OUT_DIR/row_reduce.<device>.<date>.md and each TuneResult JSON.
"""

from __future__ import annotations

import argparse
import datetime
import math
import tempfile
from dataclasses import replace
from pathlib import Path

from cutune.gpu.backend import Job
from cutune.gpu.registry import create_backend
from cutune.project import open_kernel, tune_options
from cutune.template.variants import with_variants
from cutune.template.variants.row_reduce import RowReduce
from cutune.tune.result import TuneResult, write_result
from cutune.tune.run import tune

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = [("rms_norm.cu", "rms_norm_kernel"), ("fused_add_rms_norm.cu", "fused_add_rms_norm_kernel")]


def main() -> None:
    """Tune the samples with their row_reduce variant and write the table."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--seconds", type=float, default=100.0)
    ap.add_argument("--trials", type=int, default=80)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for file, kernel in SAMPLES:
        ctx = open_kernel(ROOT / "samples" / file, kernel)
        spec = ctx.require_spec()
        variant = RowReduce().apply(ctx.template_model, kernel, spec)
        template, combined = with_variants(ctx.template_model, kernel, [variant], spec, base=ctx.template)
        assert combined is not None
        job = Job(source_path=str(ctx.path), template=template, spec=combined, space=template.space)
        with tempfile.TemporaryDirectory() as work:
            options = replace(tune_options(ctx, trials=args.trials, seconds=args.seconds), workspace=Path(work))
            result = tune(job, create_backend("cupy"), options)
        write_result(result, args.out / f"{Path(file).stem}.row_reduce.result.json")
        results.append((file, result))
        print(_table(file, result), flush=True)
    device = results[0][1].device.replace(" ", "-")
    date = datetime.datetime.now(datetime.UTC).date().isoformat()
    lines = [
        f"# row_reduce on {results[0][1].device}, {date}",
        "",
        "Measured with `python benchmarks/row_reduce.py` (the tune pipeline: L2 flushed before each launch, "
        "every candidate checked against the original on fresh inputs, winners re-measured interleaved with "
        "the original). Floor = fewest bytes / measured copy bandwidth + one empty launch.",
        "",
    ]
    lines += [_table(file, result) for file, result in results]
    (args.out / f"row_reduce.{device}.{date}.md").write_text("\n".join(lines) + "\n")


def _table(file: str, result: TuneResult) -> str:
    rows = [
        f"## {file} ({result.trials} configurations, {result.search_seconds:.0f} s search, "
        f"failures {dict(result.failures) or 'none'})",
        "",
        "| size | original µs | tuned µs | speedup | % of floor | configuration |",
        "|---|---|---|---|---|---|",
    ]
    for s in result.sizes:
        size = ", ".join(f"{k}={v}" for k, v in s.size.items())
        floor = f"{s.pct_of_sol:.0f}%" if s.pct_of_sol is not None else "?"
        rows.append(
            f"| {size} | {s.original.median_us:.2f} | {s.tuned.median_us:.2f} | {s.speedup:.2f}× | {floor} | "
            f"{s.best_config} |"
        )
    geomean = math.exp(sum(math.log(s.speedup) for s in result.sizes) / len(result.sizes))
    rows += ["", f"geomean speedup {geomean:.2f}×; worst size {min(s.speedup for s in result.sizes):.2f}×", ""]
    return "\n".join(rows)


if __name__ == "__main__":
    main()
