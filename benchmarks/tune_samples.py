"""Tune every sample on the GPU through the real pipeline and write a table of what was gained.

    python benchmarks/tune_samples.py OUT_DIR [--trials 60] [--seconds 150]

For each sample: templatize, measure the original, search (Optuna, isolated worker, L2 flushed),
re-measure the best interleaved with the original, and record original time, tuned time, speedup,
% of the speed-of-light floor per problem size, trials and the search's wall-clock. Writes
OUT_DIR/tune_samples.<device>.<date>.json and .md, every measurement as a replay recording
(OUT_DIR/<stem>.tune.jsonl) and each TuneResult JSON.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import optuna

from cutune.gpu.registry import create_backend
from cutune.project import build_job, open_kernel, tune_options
from cutune.tune.result import write_result
from cutune.tune.run import tune

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = [("silu_and_mul.cu", "silu_and_mul_kernel"), ("merge_attn_states.cu", "merge_attn_states_kernel")]


def main() -> None:
    """Tune the samples and write the tables."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--seconds", type=float, default=150.0)
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    rows, results = [], []
    for file, kernel in SAMPLES:
        ctx = open_kernel(ROOT / "samples" / file, kernel)
        job = build_job(ctx)
        with tempfile.TemporaryDirectory() as workspace:  # a fresh study each run
            options = replace(tune_options(ctx, trials=args.trials, seconds=None), workspace=Path(workspace))
            options = replace(options, budget=replace(options.budget, search_seconds=args.seconds))
            backend = create_backend("cupy", record=args.out / f"{Path(file).stem}.tune.jsonl")
            start = time.perf_counter()
            result = tune(job, backend, options)
            wall = time.perf_counter() - start
        write_result(result, args.out / f"{Path(file).stem}.{kernel}.result.json")
        results.append({**result.to_dict(), "wall_seconds": wall})
        for s in result.sizes:
            rows.append(
                {
                    "kernel": kernel,
                    "size": s.size,
                    "original_us": s.original.median_us,
                    "original_spread": s.original.spread,
                    "tuned_us": s.tuned.median_us,
                    "speedup": s.speedup,
                    "pct_of_sol": s.pct_of_sol,
                    "sol_floor_us": s.sol_floor_us,
                    "best_config_here": dict(s.best_config),
                    "significant_here": s.significant,
                }
            )
        print(
            f"{kernel}: {result.speedup:.3f}x geomean, best {dict(result.best)}, significant "
            f"{result.significant}, {result.trials} trials, search {result.search_seconds:.1f}s, "
            f"wall {wall:.1f}s, failures {result.failures}",
            flush=True,
        )
    device = results[0]["device"] if results else "unknown"
    date = datetime.date.today().isoformat()
    stem = f"tune_samples.{device.replace(' ', '-')}.{date}"
    (args.out / f"{stem}.json").write_text(
        json.dumps({"device": device, "date": date, "rows": rows, "results": results}, indent=2)
    )
    lines = [
        f"# cutune tuning the samples — {device}, {date}",
        "",
        "| kernel | size | original µs (spread) | tuned µs | speedup | % of SOL |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        sol = f"{r['pct_of_sol']:.0f}%" if r["pct_of_sol"] is not None else "-"
        lines.append(
            f"| {r['kernel']} | {r['size']} | {r['original_us']:.2f} ({r['original_spread']:.1%}) | "
            f"{r['tuned_us']:.2f} | {r['speedup']:.3f}× | {sol} |"
        )
    head = "| kernel | best configuration | geomean speedup | significant | trials | search s | wall s |"
    lines += ["", head, "|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(
            f"| {r['kernel']} | {r['best']} | {r['speedup']:.3f}× | {r['significant']} | {r['trials']} "
            f"| {r['search_seconds']:.1f} | {r['wall_seconds']:.1f} |"
        )
    (args.out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
