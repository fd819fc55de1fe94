"""What the correctness checks cost: tuning wall time of each sample with every check on, and with them off.

    python benchmarks/checks_cost.py OUT_DIR [--trials 40] [--seconds 120] [--repeats 1]

"On" is the default pipeline: guard regions, ragged sizes, reference validation, the race re-run of a
failing configuration, fresh-input re-checks of the finalists and compute-sanitizer on the winners
(where it is on PATH). "Off" is `CupyBackend(checks=False)`, no re-checks, no sanitizer: an option that
exists only for this measurement. Both run the same search (same sampler seed, same trial budget) in a
fresh study, with a fresh CuPy kernel cache each (so neither reuses the other's compiles), after one
warm-up open that measures the device's speed of light. Writes OUT_DIR/checks_cost.<device>.<date>.json
and prints one line per run; the target is at most 15% more wall time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import optuna

from cutune.gpu.registry import create_backend
from cutune.project import build_job, open_kernel, tune_options
from cutune.tune.run import tune

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = [("silu_and_mul.cu", "silu_and_mul_kernel"), ("merge_attn_states.cu", "merge_attn_states_kernel")]


def timed_tune(file: str, kernel: str, *, checks: bool, trials: int, seconds: float) -> dict[str, object]:
    """One tuning run of a sample in a fresh study and kernel cache; its wall time and outcome."""
    ctx = open_kernel(ROOT / "samples" / file, kernel)
    job = build_job(ctx)
    with tempfile.TemporaryDirectory() as workspace, tempfile.TemporaryDirectory() as kernel_cache:
        os.environ["CUPY_CACHE_DIR"] = kernel_cache  # the spawned worker inherits it
        options = replace(tune_options(ctx, trials=trials, seconds=seconds), workspace=Path(workspace))
        if not checks:
            options = replace(options, selection=replace(options.selection, verify_seeds=0), sanitize=False)
        backend = create_backend("cupy", checks=checks)
        start = time.perf_counter()
        result = tune(job, backend, options)
        wall = time.perf_counter() - start
    return {
        "kernel": kernel,
        "checks": checks,
        "wall_seconds": wall,
        "search_seconds": result.search_seconds,
        "trials": result.trials,
        "failures": result.failures,
        "speedup": result.speedup,
        "device": result.device,
    }


def main() -> None:
    """Run each sample with checks off and on (alternating), and write the comparison."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    warm = create_backend("cupy", isolate=False)  # measures and caches the speed of light once
    warm.open(build_job(open_kernel(ROOT / "samples" / SAMPLES[0][0], SAMPLES[0][1])))
    warm.close()
    runs = []
    for file, kernel in SAMPLES:
        for _ in range(args.repeats):
            for checks in (False, True):
                run = timed_tune(file, kernel, checks=checks, trials=args.trials, seconds=args.seconds)
                runs.append(run)
                print(
                    f"{kernel} checks {'on ' if checks else 'off'}: wall {run['wall_seconds']:.1f} s, search "
                    f"{run['search_seconds']:.1f} s, {run['trials']} trials, failures {run['failures']}",
                    flush=True,
                )
    summary = {}
    for _, kernel in SAMPLES:
        off = sum(r["wall_seconds"] for r in runs if r["kernel"] == kernel and not r["checks"])  # type: ignore[misc]
        on = sum(r["wall_seconds"] for r in runs if r["kernel"] == kernel and r["checks"])  # type: ignore[misc]
        summary[kernel] = {"off_seconds": off, "on_seconds": on, "overhead": on / off - 1 if off else None}
        print(f"{kernel}: checks cost {100 * (on / off - 1):+.1f}% wall time (target <= 15%)", flush=True)
    device = str(runs[0]["device"]) if runs else "unknown"
    date = datetime.date.today().isoformat()
    stem = f"checks_cost.{device.replace(' ', '-')}.{date}"
    report = {"device": device, "date": date, "trials": args.trials, "summary": summary, "runs": runs}
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out / (stem + '.json')}")


if __name__ == "__main__":
    main()
