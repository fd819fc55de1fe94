"""What selection costs next to the search: sequential selection (the default) against every round measured.

    python benchmarks/selection_cost.py OUT_DIR [--only rms_norm] [--trials 200] [--every-round [N]] [--same-open] # GPU
    python benchmarks/selection_cost.py OUT_DIR --replay [--seeds 8]                                              # CPU

GPU: per sample, one `tune` as `cutune tune` runs it by default (200 trials, a 600 s budget, sequential
selection, compute-sanitizer where it is on PATH) in a fresh study, after one open of the backend that builds
CuPy's own kernels on a fresh machine (`warm_up_open_seconds`): its wall time against its search phase
(target: at most 1.5×), and the evaluations after the search (what one costs: the selection's seconds over
its evaluations, so the ratio at other trial counts follows). With `--every-round`, then, on the same
study (its trial budget what the first run measured: no search, the same finalists), the selection again
with every round measured (`SelectionOptions(sequential=False)`), without the sanitizer: the same GPU, the same run,
the same finalists, so the confirmed per-size speedups compare (target: within 1% where both modes confirm a size)
and so do the selection phases' wall times. The second run's backend compiles the finalists again (from
CuPy's disk cache, warm by then); its selection phase does not include that. `--every-round 2` runs that
selection twice: the two runs' differences are what noise alone does to confirmed speedups. With `--same-open`,
the every-round selections measure on the default run's backend, still open (its buffers, its loaded modules):
a fresh open shifts every few-µs median of a run together by up to ~0.2 µs (run 10, H200: not the SM clock, not
load, idle or a search before, benchmarks/clock_state.py), so only one open compares the selections themselves.

CPU (`--replay`): the same comparison on the recordings in benchmarks/results/recordings, with seeded
replay noise (`--noise`, default 1%); the cost is counted in evaluations (one evaluation = one
configuration timed at every size), which is what a GPU run's selection time is made of. A recording
serves a configuration's measurements in turn, so a different call order gets other recorded values:
the replayed speedups of the two modes differ by that too, not by noise alone. One noise seed is one draw
of that lottery (the compile-flag tie of silu_and_mul goes one way or the other): `--seeds N` replays
seeds 1..N and reports the mean evaluations and the mean per-size geomean speedup of each mode.
`--against OLD.json` (a report of another version's replay) compares its sequential runs, seed by seed,
with this one's: the confirmed per-size speedups before and after a change.

Writes OUT_DIR/selection_cost.<device>.<date>.json and prints one line per run.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna

from cutune.gpu.backend import Backend, Capability, Check, DeviceInfo, Job, Measurement
from cutune.gpu.registry import create_backend
from cutune.gpu.replay import ReplayBackend
from cutune.project import build_job, open_kernel, tune_options
from cutune.template.model import Config
from cutune.tune.geomean import weighted_geomean
from cutune.tune.options import TuneOptions
from cutune.tune.result import TuneResult
from cutune.tune.run import tune
from cutune.workflow.variants import variants_of, with_combined

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = {
    "silu_and_mul": "silu_and_mul_kernel",
    "rms_norm": "rms_norm_kernel",
    "gated_activation": "act_and_mul_kernel",
    "kv_cache_write": "kv_cache_write_kernel",
}
RECORDINGS = {  # sample → (recording, the spec it was made with, where that is not the sample's own)
    "silu_and_mul": ("silu_and_mul.tune.NVIDIA-H200.2026-11-21.jsonl", "tests/data/gpu/recorded_specs"),
    "kv_cache_write": ("kv_cache_write.tune.NVIDIA-H100-80GB-HBM3.2026-11-22-2.jsonl", None),
}


class Kept:
    """One open backend per job, kept across `tune` runs until `close`: the runs after the first measure on the
    first run's buffers and loaded modules, so what differs between their confirmed speedups is the selection, not
    where a fresh open placed things (benchmarks/reopen_spread.py: up to 2.6% at few-µs sizes)."""

    def __init__(self) -> None:
        self.backends: list[tuple[Job, Backend, DeviceInfo]] = []

    def open(self, job: Job) -> tuple[Backend, DeviceInfo]:
        """The backend open on `job`, opened now if none is."""
        for kept, backend, info in self.backends:
            if kept == job:
                return backend, info
        backend = create_backend("cupy")
        info = backend.open(job)
        self.backends.append((job, backend, info))
        return backend, info

    def close(self) -> None:
        """Close every kept backend."""
        for _, backend, _ in self.backends:
            backend.close()
        self.backends.clear()


class Counted(Backend):
    """Counts the evaluations of the backend it wraps (the replay's cost unit); forwards everything else, so a
    GPU run around it compiles ahead, sanitizes and reports its capabilities as the backend alone would. With
    `kept`, its opens take (and its close leaves) the kept backends instead; `inner` then only answers what is
    asked before the first open."""

    name = "counted"

    def __init__(self, inner: Backend, kept: Kept | None = None) -> None:
        self.inner = inner
        self.kept = kept
        self.evaluations = 0
        self.opens: list[dict[str, float]] = []  # per open: its seconds, and the evaluations before it

    def open(self, job: Job) -> DeviceInfo:
        began = time.perf_counter()
        try:
            if self.kept is None:
                return self.inner.open(job)
            self.inner, info = self.kept.open(job)
            return info
        finally:
            self.opens.append({"seconds": time.perf_counter() - began, "after_evaluations": self.evaluations})

    def evaluate(self, config: Config, at: Sequence[int] | None = None) -> Measurement:
        self.evaluations += 1
        return self.inner.evaluate(config, at)

    def prefetch(self, configs: Sequence[Config]) -> None:
        self.inner.prefetch(configs)

    def can(self, capability: Capability) -> bool:
        return self.inner.can(capability)

    @property
    def healthy(self) -> bool:
        return self.inner.healthy

    def verify(self, config: Config, seed: int) -> Check | None:
        return self.inner.verify(config, seed)

    def sanitize(self, configs: Sequence[Config]) -> tuple[Check, ...] | None:
        return self.inner.sanitize(configs)

    def close(self) -> None:
        if self.kept is None:
            self.inner.close()


def summary(result: TuneResult, wall: float, mode: str, evaluations: int | None = None) -> dict[str, Any]:
    """One run's cost and its confirmed per-size speedups."""
    search = result.phases.get("search", 0.0)
    return {
        "kernel": result.kernel,
        "mode": mode,
        "device": result.device,
        "wall_seconds": wall,
        "phases": result.phases,
        "wall_over_search": wall / search if search > 0 else None,
        "trials": result.trials,
        "evaluations": evaluations,
        "speedups": [s.speedup if s.significant else 1.0 for s in result.sizes],
        "sizes": [s.size for s in result.sizes],
        # what each size launches and both medians: whether two runs differ by their picks or by their timings
        "configs": [dict(s.best_config) if s.significant else None for s in result.sizes],
        "original_us": [s.original.median_us for s in result.sizes],
        "tuned_us": [s.tuned.median_us for s in result.sizes],
    }


def compare(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Where both confirmed a size: the largest relative difference of their speedups; and where one did only."""
    both = [(a, b) for a, b in zip(first["speedups"], second["speedups"], strict=True) if a > 1.0 and b > 1.0]
    only = sum((a > 1.0) != (b > 1.0) for a, b in zip(first["speedups"], second["speedups"], strict=True))
    return {"max_difference": max((abs(a / b - 1) for a, b in both), default=0.0), "sizes_confirmed_by_one": only}


def gpu_runs(sample: str, trials: int, seconds: float, every_round: int, same_open: bool) -> list[dict[str, Any]]:
    """The default run, then `every_round` times the selection with every round measured on its study (with
    `same_open`, on the default run's open backend)."""
    ctx = open_kernel(ROOT / "samples" / f"{sample}.cu", SAMPLES[sample])
    job = build_job(with_combined(ctx, variants_of(ctx)))  # the structural variants too, as `cutune tune` does
    runs: list[dict[str, Any]] = []
    # a fresh machine's first open builds CuPy's own kernels (its random generator, the checks' reductions): once
    # per machine, not per run, so it is paid here and reported apart
    warm_up = create_backend("cupy")
    began = time.perf_counter()
    warm_up.open(job)
    warm_up.close()
    warm_up_s = time.perf_counter() - began
    kept = Kept() if same_open else None
    with tempfile.TemporaryDirectory() as workspace, contextlib.closing(kept or Kept()):
        options = replace(tune_options(ctx, trials=trials, seconds=seconds), workspace=Path(workspace))
        plan: list[tuple[str, TuneOptions]] = [("default", options)]
        every = replace(options, selection=replace(options.selection, sequential=False), sanitize=False)
        plan += [(f"every round{f' ({n + 1})' if n else ''}", every) for n in range(every_round)]
        for mode, opts in plan:
            if runs:  # the study's search is done: the same finalists, no search of its own
                opts = replace(opts, budget=replace(opts.budget, trials=max(1, runs[0]["trials"])))
            backend = Counted(create_backend("cupy"), kept)
            began = time.perf_counter()
            result = tune(job, backend, opts)
            runs.append(summary(result, time.perf_counter() - began, mode, backend.evaluations))
            # the search's evaluations: the trials this run measured and the original's baseline
            after = backend.evaluations - (result.own_trials or 0) - 1
            runs[-1]["evaluations_after_search"] = after
            runs[-1]["opens"] = backend.opens  # the last one, after the selection, is the held-out sizes'
            runs[-1]["warm_up_open_seconds"] = warm_up_s
            selection_s = result.phases.get("selection", 0.0)
            runs[-1]["selection_seconds_per_evaluation"] = selection_s / after if after > 0 else None
            print(line(runs[-1]), flush=True)
    return runs


def replay_runs(sample: str, noise: float, seed: int = 1) -> list[dict[str, Any]]:
    """Both selections on a recording, each in a fresh study, with the same seeded noise."""
    recording, spec_dir = RECORDINGS[sample]
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / f"{sample}.cu"
        shutil.copy(ROOT / "samples" / f"{sample}.cu", source)
        shutil.copy((ROOT / (spec_dir or "samples")) / f"{sample}.tune.toml", folder)
        job = build_job(open_kernel(source, SAMPLES[sample]))
        for mode, sequential in (("sequential", True), ("every round", False)):
            options = replace(tune_options(open_kernel(source, SAMPLES[sample]), trials=200, seconds=None))
            options = replace(
                options,
                workspace=Path(folder) / mode.replace(" ", "_"),
                selection=replace(options.selection, sequential=sequential),
            )
            path = ROOT / "benchmarks" / "results" / "recordings" / recording
            backend = Counted(ReplayBackend(path, noise=noise, seed=seed))
            began = time.perf_counter()
            result = tune(job, backend, options)
            run = summary(result, time.perf_counter() - began, mode, backend.evaluations)
            run["search_evaluations"] = result.trials + 1  # the trials, and the baseline of their objectives
            run["evaluations_over_search"] = backend.evaluations / run["search_evaluations"]
            run["seed"] = seed
            runs.append(run)
            print(line(run), flush=True)
    return runs


def over_seeds(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per mode, over the noise seeds: mean evaluations, mean evaluations / search, mean geomean speedup."""
    out: dict[str, Any] = {}
    for mode in dict.fromkeys(r["mode"] for r in runs):
        mine = [r for r in runs if r["mode"] == mode]
        out[mode] = {
            "seeds": len(mine),
            "mean_evaluations": statistics.mean(r["evaluations"] for r in mine),
            "mean_evaluations_over_search": statistics.mean(r["evaluations_over_search"] for r in mine),
            "mean_geomean_speedup": statistics.mean(weighted_geomean(r["speedups"]) for r in mine),
        }
    return out


def against(old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per seed both reports replayed: `compare` of their sequential runs, and the two per-size speedups."""
    mine = {r.get("seed", 1): r for r in new if r["mode"] == "sequential"}
    out = {}
    for r in old:
        if r["mode"] == "sequential" and r.get("seed", 1) in mine:
            seed = r.get("seed", 1)
            out[str(seed)] = {**compare(r, mine[seed]), "before": r["speedups"], "after": mine[seed]["speedups"]}
    return out


def line(run: dict[str, Any]) -> str:
    """One printed line per run."""
    spent = ", ".join(f"{k} {v:.1f}" for k, v in run["phases"].items())
    counted = f", {run['evaluations']} evaluations" if run["evaluations"] is not None else ""
    speedups = " ".join(f"{s:.3f}" for s in run["speedups"])
    return f"{run['kernel']} [{run['mode']}]: wall {run['wall_seconds']:.1f} s ({spent}){counted}; per size {speedups}"


def cpu_model() -> str:
    """The host's CPU model (where the replay ran)."""
    try:
        for text in Path("/proc/cpuinfo").read_text().splitlines():
            if text.startswith("model name"):
                return text.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    """Run the samples (GPU) or the recordings (CPU), compare the modes, write the report."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", default=",".join(SAMPLES))
    ap.add_argument("--trials", type=int, default=200, help="GPU: the trial budget (`cutune tune`'s default)")
    ap.add_argument("--seconds", type=float, default=600.0, help="GPU: the time budget (`cutune tune`'s default)")
    ap.add_argument(
        "--every-round", type=int, nargs="?", const=1, default=0,
        help="GPU: also the selection with every round measured (N times: their spread is the noise of a selection)",
    )  # fmt: skip
    ap.add_argument(
        "--same-open", action="store_true",
        help="GPU: the every-round selections measure on the default run's open backend (its buffers and modules)",
    )  # fmt: skip
    ap.add_argument("--replay", action="store_true", help="the CPU version, on recordings")
    ap.add_argument("--noise", type=float, default=0.01, help="replay: seeded noise per measurement (log sd)")
    ap.add_argument("--seeds", type=int, default=1, help="replay: noise seeds 1..N, each a run of both modes")
    ap.add_argument("--against", type=Path, help="replay: a report of another version to compare, seed by seed")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"date": datetime.date.today().isoformat(), "samples": {}, "same_open": args.same_open}
    if args.replay:
        report["noise"] = args.noise
    for sample in args.only.split(","):
        if args.replay and sample not in RECORDINGS:
            continue
        if args.replay:
            runs = [run for seed in range(1, args.seeds + 1) for run in replay_runs(sample, args.noise, seed)]
        else:
            runs = gpu_runs(sample, args.trials, args.seconds, args.every_round, args.same_open)
        by_mode = {r["mode"]: r for r in runs if r.get("seed", 1) == 1}
        entry: dict[str, Any] = {"runs": runs}
        if args.replay and args.seeds > 1:
            entry["over_seeds"] = over_seeds(runs)
        sequential = by_mode.get("sequential") or by_mode["default"]
        full = by_mode.get("every round")
        if full is not None:
            entry["sequential_vs_every_round"] = compare(sequential, full)
        if full is not None and (again := by_mode.get("every round (2)")) is not None:
            # the same selection twice on the same finalists: how far its confirmed speedups move by noise alone
            entry["every_round_vs_itself"] = compare(full, again)
            entry["sequential_vs_every_round_2"] = compare(sequential, again)
        if "default" in by_mode:
            entry["default_wall_over_search"] = by_mode["default"]["wall_over_search"]
            entry["selection_seconds"] = {
                "sequential": sequential["phases"].get("selection"),
                "every round": full["phases"].get("selection") if full is not None else None,
            }
        if args.against is not None:
            old = json.loads(args.against.read_text())["samples"][sample]["runs"]
            entry["against"] = against(old, runs)
        report["samples"][sample] = entry
        print(f"{sample}: {json.dumps({k: v for k, v in entry.items() if k != 'runs'})}", flush=True)
    devices = sorted({r["device"] for e in report["samples"].values() for r in e["runs"]})
    report["device"] = ", ".join(devices)  # a replay's: the GPU the recordings were made on
    if args.replay:
        report["host"] = cpu_model()
    stem = f"selection_cost.{'replay' if args.replay else '-'.join(devices).replace(' ', '-')}.{report['date']}"
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out / (stem + '.json')}")


if __name__ == "__main__":
    main()
