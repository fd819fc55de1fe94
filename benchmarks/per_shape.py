"""Per-shape winners on the KV-cache write: per-size gains, the gain over the single best configuration,
the held-out sizes that check the dispatch, and the guarantee that no size gets slower.

    python benchmarks/per_shape.py OUT_DIR [--record] [--trials 60] [--seconds 120]
    python benchmarks/per_shape.py OUT_DIR --replay RECORDING      # no GPU: the same report, replayed

Tunes samples/kv_cache_write.cu (decode sizes weigh more, see its spec) through the real pipeline (CuPy
in an isolated worker, L2 flushed; or a recording replayed), applies the result as a per-size dispatch
and writes OUT_DIR/per_shape.<device>.<date>.json and .md: per tuned and held-out size the original and
dispatched times, speedup, % of the speed-of-light floor, the configuration launched and the single
best configuration's speedup there; and per size whether the dispatch is ≥ 1.00× the original within
the measured noise (the original's p10–p90 spread). `--record` also writes every measurement as
OUT_DIR/kv_cache_write.tune.<device>.<date>.jsonl, for replay without a GPU. Replayed reports say so.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna

from cutune.gpu.registry import create_backend
from cutune.project import build_job, open_kernel, tune_options
from cutune.tune.result import SizeResult, TuneResult, write_result
from cutune.tune.run import tune
from cutune.workflow import apply_result

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "kv_cache_write.cu"
KERNEL = "kv_cache_write_kernel"


def run(
    out: Path, *, replay: Path | None, record: bool, trials: int, seconds: float, noise: float = 0.0
) -> dict[str, Any]:
    """Tune the sample, write the report and the dispatched source; returns the report. `noise` adds
    seeded log-normal noise to replayed timings (tests of the guarantee under noise)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    out.mkdir(parents=True, exist_ok=True)
    ctx = open_kernel(SAMPLE, KERNEL)
    day = datetime.date.today().isoformat()
    recording = out / f"kv_cache_write.tune.recording.{day}.jsonl" if record and replay is None else None
    with tempfile.TemporaryDirectory() as workspace:  # a fresh study each run
        options = replace(tune_options(ctx, trials=trials, seconds=None), workspace=Path(workspace))
        options = replace(options, budget=replace(options.budget, search_seconds=seconds))  # the search's own
        backend = (
            create_backend("replay", path=replay, noise=noise)
            if replay is not None
            else create_backend("cupy", isolate=True, record=recording)
        )
        start = time.perf_counter()
        result = tune(build_job(ctx), backend, options)
        wall = time.perf_counter() - start
    device = re.sub(r"[^A-Za-z0-9]+", "-", result.device).strip("-")
    stem = f"per_shape.{device}.{day}" + (".replayed" if result.replayed is not None else "")
    if recording is not None:
        recording = recording.rename(out / f"kv_cache_write.tune.{device}.{day}.jsonl")
    write_result(result, out / f"{stem}.result.json")
    (out / f"{stem}.dispatch.cu").write_text(apply_result(ctx, result).text, encoding="utf-8")
    report = _report(result, wall, recording)
    (out / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out / f"{stem}.md").write_text(_markdown(report), encoding="utf-8")
    return report


def holds(s: SizeResult) -> bool:
    """The guarantee at one size: the dispatch is at least as fast as the original within its noise."""
    return s.tuned.median_us <= s.original.p90_us or s.speedup >= 1.0


def _report(result: TuneResult, wall: float, recording: Path | None) -> dict[str, Any]:
    def size_row(s: SizeResult) -> dict[str, Any]:
        return {
            "size": s.size,
            "held_out": s.held_out,
            "weight": s.weight,
            "original_us": s.original.median_us,
            "original_spread": s.original.spread,
            "tuned_us": s.tuned.median_us,
            "speedup": s.speedup,
            "pct_of_sol": s.pct_of_sol,
            "launched": {k: v for k, v in s.best_config.items() if result.original.get(k) != v},
            "single_best_speedup": s.single_speedup,
            "at_least_original_within_noise": holds(s),
        }

    return {
        "kernel": result.kernel,
        "device": result.device,
        "measured": result.measured_on(),
        "date": result.date,
        "wall_seconds": wall,
        "trials": result.trials,
        "speedup_weighted_geomean": result.speedup,
        "single_best": dict(result.single) if result.single is not None else None,
        "single_best_speedup": result.single_speedup,
        "gain_over_single_best": result.gain_over_single,
        "per_file": dict(result.per_file),
        "per_file_cost": result.per_file_cost,
        "dispatch": result.dispatch.to_dict() if result.dispatch is not None else None,
        "held_out_note": result.held_out_note,
        "guarantee_holds": all(holds(s) for s in (*result.sizes, *result.held_out)),
        "recording": recording.name if recording is not None else None,
        "sizes": [size_row(s) for s in (*result.sizes, *result.held_out)],
    }


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Per-shape winners: {report['kernel']} {report['measured']}",
        "",
        f"Weighted geomean {report['speedup_weighted_geomean']:.3f}×; the single best configuration "
        f"{report['single_best']} at every size: {report['single_best_speedup'] or 0:.3f}×; per-size dispatch "
        f"over it: {report['gain_over_single_best'] or 0:.3f}×. Compile flags chosen once: {report['per_file']} "
        f"(cost {100 * (report['per_file_cost'] - 1):.1f}%). {report['trials']} configurations, "
        f"{report['wall_seconds']:.0f} s. Guarantee (≥ 1.00× within noise at every tuned and held-out size): "
        f"{'holds' if report['guarantee_holds'] else 'VIOLATED'}.",
        "",
        "| size | weight | original µs | dispatched µs | speedup | % SOL | launched | single best | ≥ 1.00× |",
        "|---|--:|--:|--:|--:|--:|---|--:|---|",
    ]
    for r in report["sizes"]:
        size = ", ".join(f"{k}={v}" for k, v in r["size"].items()) + (" (held out)" if r["held_out"] else "")
        sol = "–" if r["pct_of_sol"] is None else f"{r['pct_of_sol']:.0f}%"
        single = "–" if r["single_best_speedup"] is None else f"{r['single_best_speedup']:.2f}×"
        launched = ", ".join(f"{k}={v}" for k, v in r["launched"].items()) or "original"
        lines.append(
            f"| {size} | {'–' if r['held_out'] else r['weight']} | {r['original_us']:.2f} | {r['tuned_us']:.2f} | "
            f"{r['speedup']:.2f}× | {sol} | {launched} | {single} | "
            f"{'yes' if r['at_least_original_within_noise'] else 'NO'} |"
        )
    if report["held_out_note"]:
        lines += ["", f"Held-out sizes not measured: {report['held_out_note']}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Parse the command line and run."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--replay", type=Path, help="a recording to replay instead of measuring")
    ap.add_argument("--record", action="store_true", help="also write every measurement as a recording")
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--seconds", type=float, default=120.0)
    args = ap.parse_args()
    report = run(args.out, replay=args.replay, record=args.record, trials=args.trials, seconds=args.seconds)
    print(_markdown(report))


if __name__ == "__main__":
    main()
