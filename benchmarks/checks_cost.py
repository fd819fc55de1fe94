"""What the correctness checks cost: tuning wall time of each sample with every check on, and with them off.

    python benchmarks/checks_cost.py OUT_DIR [--trials 40] [--seconds 120] [--repeats 1]

"On" is the default pipeline: guard regions, ragged sizes, reference validation, the race re-run of a
failing configuration, fresh-input re-checks of the finalists and compute-sanitizer on the winners
(where it is on PATH). "Off" is `CupyBackend(checks=False)`, no re-checks, no sanitizer: an option that
exists only for this measurement. Both run the same search (same sampler seed, same trial budget) in a
fresh study and a fresh process, as a `cutune tune` command does; repeats alternate which runs first.

The CuPy kernel cache of every run starts as a copy of one warmed by a short checked run of another
sample (kv_cache_write): CuPy's own kernels (input generation, comparisons, guard checks), which a user
compiles once per machine, are cached for both, and the candidate kernels are compiled by each run
itself. (A first version ran both in one process with empty caches: whichever ran first paid the
warm-up, and the checks' CuPy kernels were charged to them on every run.) Writes
OUT_DIR/checks_cost.<device>.<date>.json with the wall time of each phase of each run, and prints one
line per run; the target is at most 15% more wall time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna

from cutune.gpu.registry import create_backend
from cutune.project import build_job, open_kernel, tune_options
from cutune.tune.run import tune

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = [("silu_and_mul.cu", "silu_and_mul_kernel"), ("merge_attn_states.cu", "merge_attn_states_kernel")]
WARM_UP = ("kv_cache_write.cu", "kv_cache_write_kernel")  # warms CuPy's own kernels; not a measured sample


def timed_tune(file: str, kernel: str, *, checks: bool, trials: int, seconds: float) -> dict[str, Any]:
    """One tuning run of a sample in a fresh study (the CuPy kernel cache is the caller's); its wall time."""
    ctx = open_kernel(ROOT / "samples" / file, kernel)
    job = build_job(ctx)
    with tempfile.TemporaryDirectory() as workspace:
        options = replace(tune_options(ctx, trials=trials, seconds=None), workspace=Path(workspace))
        options = replace(options, budget=replace(options.budget, search_seconds=seconds))  # the search's own
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
        "phases": result.phases,
        "sizes": [{"size": s.size, "speedup": s.speedup, "launched": dict(s.best_config)} for s in result.sizes],
    }


def in_fresh_process(
    file: str, kernel: str, *, checks: bool, trials: int, seconds: float, cache: Path
) -> dict[str, Any]:
    """`timed_tune` in a new Python process whose CuPy kernel cache is `cache`."""
    command = [sys.executable, __file__, "--one", file, kernel, "on" if checks else "off"]
    command += ["--trials", str(trials), "--seconds", str(seconds)]
    env = {**os.environ, "CUPY_CACHE_DIR": str(cache)}  # the spawned worker and sanitizer inherit it
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{file} {kernel} (checks {'on' if checks else 'off'}) failed:\n{done.stderr[-3000:]}")
    run: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    run["log"] = done.stderr.splitlines()[-60:]
    return run


def phase_totals(runs: list[dict[str, Any]], kernel: str, *, checks: bool) -> dict[str, float]:
    """Wall seconds per phase, summed over the runs of `kernel` with checks on (or off)."""
    totals: dict[str, float] = {}
    for run in runs:
        if run["kernel"] == kernel and run["checks"] is checks:
            for name, seconds in run["phases"].items():
                totals[name] = totals.get(name, 0.0) + seconds
    return totals


def main() -> None:
    """Run each sample with checks off and on (alternating which goes first), and write the comparison."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--one", nargs=3, metavar=("FILE", "KERNEL", "CHECKS"), help="one run, printed as JSON")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if args.one:  # the selection's reasons go to stderr, which the parent keeps
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
        logging.getLogger("cutune.tune.select").setLevel(logging.DEBUG)
        file, kernel, checks = args.one
        run = timed_tune(file, kernel, checks=checks == "on", trials=args.trials, seconds=args.seconds)
        print(json.dumps(run))
        return
    if args.out is None:
        ap.error("OUT_DIR is required")
    args.out.mkdir(parents=True, exist_ok=True)
    warm_cache = Path(tempfile.mkdtemp(prefix="cutune-checks-cost-"))
    # measures and caches the speed of light, and compiles CuPy's own kernels into warm_cache
    in_fresh_process(*WARM_UP, checks=True, trials=4, seconds=10.0, cache=warm_cache)
    runs: list[dict[str, Any]] = []
    for file, kernel in SAMPLES:
        for repeat in range(args.repeats):
            for checks in (False, True) if repeat % 2 == 0 else (True, False):
                with tempfile.TemporaryDirectory() as cache:
                    shutil.copytree(warm_cache, cache, dirs_exist_ok=True)
                    run = in_fresh_process(
                        file, kernel, checks=checks, trials=args.trials, seconds=args.seconds, cache=Path(cache)
                    )
                runs.append(run)
                spent = ", ".join(f"{k} {v:.1f}" for k, v in run["phases"].items())
                print(
                    f"{kernel} checks {'on ' if checks else 'off'}: wall {run['wall_seconds']:.1f} s ({spent}), "
                    f"{run['trials']} trials, failures {run['failures']}",
                    flush=True,
                )
    summary = {}
    for _, kernel in SAMPLES:
        off = sum(r["wall_seconds"] for r in runs if r["kernel"] == kernel and not r["checks"])
        on = sum(r["wall_seconds"] for r in runs if r["kernel"] == kernel and r["checks"])
        phases = {side: phase_totals(runs, kernel, checks=side == "on") for side in ("off", "on")}
        summary[kernel] = {
            "off_seconds": off,
            "on_seconds": on,
            "overhead": on / off - 1 if off else None,
            "phase_seconds": phases,
        }
        # a mode that kept the original skips the sanitizer and held-out steps: its wall time covers less work
        launched = {
            json.dumps([s["launched"] for s in r["sizes"]], sort_keys=True) for r in runs if r["kernel"] == kernel
        }
        summary[kernel]["same_outcome"] = len(launched) == 1
        caveat = "" if len(launched) == 1 else "; the runs kept different configurations, so they did different work"
        print(f"{kernel}: checks cost {100 * (on / off - 1):+.1f}% wall time (target <= 15%){caveat}", flush=True)
    shutil.rmtree(warm_cache, ignore_errors=True)
    device = str(runs[0]["device"]) if runs else "unknown"
    date = datetime.date.today().isoformat()
    stem = f"checks_cost.{device.replace(' ', '-')}.{date}"
    report = {"device": device, "date": date, "trials": args.trials, "summary": summary, "runs": runs}
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out / (stem + '.json')}")


if __name__ == "__main__":
    main()
