"""Configurations evaluated per second: cutune against Kernel Tuner 1.5 (CuPy backend), same GPU and run.

    python benchmarks/vs_kernel_tuner.py OUT_DIR

Kernel: benchmarks/kernels/scale_add.cu (y = a * x + y, 4 Mi floats). Spaces: a 1-D sweep of threads
per block (32..1024 in steps of 32: 32 points) and threads per block × items per thread (128 points).
Both tools measure every point (exhaustive) and check it against a reference; each run compiles
every configuration (a define unique to the run defeats CuPy's on-disk cache), after one unreported
warm-up run of each tool. Kernel Tuner times 7 launches per point with no L2
flush (its defaults); cutune runs twice: with its defaults (≥ 30 repetitions and ≥ 20 ms of kernel time,
L2 flushed before each) and "quick" (10 repetitions, L2 still flushed) — both at least Kernel Tuner's
measurement quality. Writes OUT_DIR/vs_kernel_tuner.<device>.<date>.json and prints a table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import tempfile
import time
import traceback
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from cutune.gpu.backend import Job, TimingOptions
from cutune.gpu.registry import create_backend
from cutune.project import open_kernel
from cutune.template.model import Config, Space
from cutune.tune.options import Budget, SearchOptions, TuneOptions
from cutune.tune.run import tune

ROOT = Path(__file__).resolve().parents[1]
KERNEL_FILE = ROOT / "benchmarks" / "kernels" / "scale_add.cu"
N = 4 * 1024 * 1024
THREADS = list(range(32, 1025, 32))
SPACES: dict[str, dict[str, list[int]]] = {
    "1-D threads (32 points)": {"BLOCK_THREADS": THREADS, "ITEMS_PER_THREAD": [1]},
    "threads x items (128 points)": {"BLOCK_THREADS": THREADS, "ITEMS_PER_THREAD": [1, 2, 4, 8]},
}
TIMINGS = {"cutune (defaults)": TimingOptions(), "cutune (quick)": TimingOptions(warmup=1, reps=10, min_time_ms=0.0)}

# Kernel Tuner's version of the same kernel: it defines block_size_x and ITEMS per configuration.
KT_SOURCE = """
__global__ void scale_add(float* __restrict__ y, const float* __restrict__ x, const float a, const int n) {
  for (int item = 0; item < ITEMS; ++item) {
    const int i = (blockIdx.x * ITEMS + item) * block_size_x + threadIdx.x;
    if (i < n) {
      y[i] = a * x[i] + y[i];
    }
  }
}
"""


def run_define() -> str:
    """A define unique to one run: CuPy's on-disk cache then misses for the tuned kernel's every
    configuration (each run compiles them all), while CuPy's own helper kernels stay cached, as they
    are for anyone who has used CuPy before (both tools use CuPy, so both gain alike)."""
    return f"BENCH_RUN={uuid.uuid4().hex[:12]}"


def _job(values: dict[str, list[int]], timing: TimingOptions) -> Job:
    ctx = open_kernel(KERNEL_FILE, "scale_add")
    space = Space(tuple(replace(p, values=tuple(values[p.name])) for p in ctx.space.params), ctx.space.constraints)
    spec = ctx.require_spec()
    name, _, value = run_define().partition("=")
    spec = replace(spec, defines={**spec.defines, name: value})
    return Job(source_path=str(KERNEL_FILE), template=ctx.template, spec=spec, space=space, timing=timing)


def run_cutune(values: dict[str, list[int]], timing: TimingOptions) -> dict[str, Any]:
    """Exhaustive cutune search over `values`; configurations per second and the best time."""
    job = _job(values, timing)
    points = len(values["BLOCK_THREADS"]) * len(values["ITEMS_PER_THREAD"])
    with tempfile.TemporaryDirectory() as workspace:
        options = TuneOptions(
            workspace=Path(workspace), budget=Budget(trials=points), search=SearchOptions(sampler="grid")
        )
        start = time.perf_counter()
        result = tune(job, create_backend("cupy"), options)
        wall = time.perf_counter() - start
    return {
        "configs": result.trials,
        "failures": result.failures,
        "wall_s": wall,
        "search_s": result.search_seconds,
        "configs_per_s": result.trials / wall,
        "configs_per_s_search": result.trials / result.search_seconds if result.search_seconds else None,
        "best": dict(result.best),
        "best_us": result.sizes[0].tuned.median_us,
        "original_us": result.sizes[0].original.median_us,
        "original_spread": result.sizes[0].original.spread,
        "device": result.device,
    }


def breakdown(values: dict[str, list[int]], timing: TimingOptions) -> dict[str, Any]:
    """Where cutune's time goes: opening the worker (CUDA, reference), then each evaluation."""
    job = _job(values, timing)
    configs = [
        Config.of({"BLOCK_THREADS": t, "ITEMS_PER_THREAD": i})
        for i in values["ITEMS_PER_THREAD"]
        for t in values["BLOCK_THREADS"]
    ]
    backend = create_backend("cupy")
    start = time.perf_counter()
    backend.open(job)
    opened = time.perf_counter() - start
    backend.prefetch(configs)
    evals, compiles = [], []
    for c in configs:
        start = time.perf_counter()
        m = backend.evaluate(c)
        evals.append(time.perf_counter() - start)
        if m.compile is not None:
            compiles.append(m.compile.compile_seconds)
    backend.close()
    return {
        "open_s": opened,
        "first_eval_s": evals[0],
        "median_eval_s": statistics.median(evals[1:]),
        "evals_s": sum(evals),
        "distinct_compiles": len(values["ITEMS_PER_THREAD"]),
        "median_compile_s": statistics.median(compiles) if compiles else None,
    }


def run_kernel_tuner(values: dict[str, list[int]]) -> dict[str, Any]:
    """Exhaustive Kernel Tuner run (CuPy backend) over the same points."""
    import kernel_tuner

    rng = np.random.default_rng(0)
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    a = np.float32(1.5)
    answer = [a * x + y, None, None, None]
    params = {"block_size_x": values["BLOCK_THREADS"], "ITEMS": values["ITEMS_PER_THREAD"]}
    start = time.perf_counter()
    results, env = kernel_tuner.tune_kernel(
        "scale_add",
        KT_SOURCE,
        N,
        [y, x, a, np.int32(N)],
        params,
        grid_div_x=["block_size_x", "ITEMS"],
        lang="cupy",
        answer=answer,
        atol=1e-5,
        quiet=True,
        verbose=False,
    )
    wall = time.perf_counter() - start
    ok = [r for r in results if isinstance(r.get("time"), float)]
    best = min(ok, key=lambda r: r["time"])
    return {
        "configs": len(results),
        "wall_s": wall,
        "configs_per_s": len(results) / wall,
        "best": {k: best[k] for k in params},
        "best_us": best["time"] * 1000.0,
        "best_spread": (max(best["times"]) - min(best["times"])) / best["time"] if best.get("times") else None,
        "version": kernel_tuner.__version__,
        "overhead": {k: env.get(k) for k in ("overhead_time",)},
    }


def main() -> None:
    """Run both tools on both spaces and write the table."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    warm = {"BLOCK_THREADS": [256, 512], "ITEMS_PER_THREAD": [1]}
    run_kernel_tuner(warm)  # not reported: CUDA, CuPy and each tool's first-use costs
    run_cutune(warm, TIMINGS["cutune (quick)"])
    for space_name, values in SPACES.items():
        runners = [("Kernel Tuner 1.5", lambda v=values: run_kernel_tuner(v))]
        runners += [(name, lambda v=values, t=t: run_cutune(v, t)) for name, t in TIMINGS.items()]
        runners += [("cutune (quick) breakdown", lambda v=values: breakdown(v, TIMINGS["cutune (quick)"]))]
        for tool, run in runners:
            try:
                row = run()
            except Exception as e:  # one tool failing must not lose the other's numbers
                row = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-2000:]}
            rows.append({"space": space_name, "tool": tool, **row})
            print(json.dumps(rows[-1], default=str)[:600], flush=True)
    device = next((r["device"] for r in rows if "device" in r), "unknown")
    date = datetime.date.today().isoformat()
    for space_name in SPACES:
        kt = next((r for r in rows if r["space"] == space_name and r["tool"].startswith("Kernel")), {})
        for r in rows:
            if r["space"] == space_name and "configs_per_s" in r and kt.get("configs_per_s"):
                r["vs_kernel_tuner"] = r["configs_per_s"] / kt["configs_per_s"]
    out = args.out / f"vs_kernel_tuner.{device.replace(' ', '-')}.{date}.json"
    out.write_text(json.dumps({"device": device, "date": date, "n": N, "rows": rows}, indent=2, default=str))
    print(f"\n{device}, {date}")
    print("| space | tool | configs | wall s | configs/s | × Kernel Tuner | best µs |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "open_s" in r:
            print(
                f"| {r['space']} | {r['tool']} | open {r['open_s']:.2f} s, first {r['first_eval_s']:.2f} s, "
                f"then {1000 * r['median_eval_s']:.1f} ms per evaluation | | | | |"
            )
            continue
        if "error" in r:
            print(f"| {r['space']} | {r['tool']} | error: {r['error'][:80]} | | | | |")
            continue
        print(
            f"| {r['space']} | {r['tool']} | {r['configs']} | {r['wall_s']:.1f} | {r['configs_per_s']:.1f} | "
            f"{r.get('vs_kernel_tuner', 1.0):.1f} | {r['best_us']:.2f} |"
        )


if __name__ == "__main__":
    main()
