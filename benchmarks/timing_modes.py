"""Both timing modes at decode sizes: where single-launch event timing and CUDA-graph timing rank differently.

    python -m benchmarks.timing_modes OUT_DIR [--configs 24] [--only rms_norm,silu_and_mul,gated_activation]

Per sample, its space with the structural variants (as `cutune tune` searches it) at 1, 8, 32 and 64 tokens
(the sample's own hidden size, 8192 for the RMSNorm as in the library comparison): up to `--configs`
configurations (the original, each variant's default, then a seeded sample of the rest), each measured
under events timing (one launch per repetition, L2 flushed) and under graph timing (32 back-to-back
launches per repetition over rotated input copies, time per launch), the two modes alternating per
configuration so drift hits both alike. Per size: the fastest configuration under each mode, the rank
correlation of the two orders, and what picking by events costs when the kernel runs under graphs (the
events pick's graph time over the graph pick's). Also the floor's empty launch in both modes.

Writes OUT_DIR/timing_modes.<device>.<date>.json and .md.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import random
from pathlib import Path
from typing import Any

from benchmarks.reports import write_report

from cutune.gpu.backend import Measurement, TimingOptions
from cutune.gpu.registry import create_backend
from cutune.limits import limits_for
from cutune.project import build_job, open_kernel
from cutune.template.model import Config, Space
from cutune.template.variants.combine import VARIANT
from cutune.tune.space import Feasibility
from cutune.workflow.variants import variants_of, with_combined

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = {  # sample → (kernel, token variable, the other variables at decode sizes)
    "rms_norm": ("rms_norm_kernel", "num_tokens", {"hidden_size": 8192}),
    "silu_and_mul": ("silu_and_mul_kernel", "num_tokens", {"d": 4096}),
    "gated_activation": ("act_and_mul_kernel", "num_tokens", {"d": 4096}),
}
TOKENS = (1, 8, 32, 64)


def configs_of(space: Space, feasible: Feasibility, count: int, seed: int = 0) -> list[Config]:
    """The original, each variant's default, then seeded random feasible configurations, `count` in all."""
    default = space.default()
    chosen = [default]
    variant = next((p for p in space.params if p.name == VARIANT), None)
    for v in variant.values if variant is not None else ():
        candidate = Config.of({**default, VARIANT: v})
        if candidate not in chosen and feasible.violation(candidate) is None:
            chosen.append(candidate)
    rng = random.Random(seed)
    for _ in range(50 * count):
        if len(chosen) >= count:
            break
        candidate = Config.of({p.name: rng.choice(p.values) for p in space.params})
        if candidate not in chosen and feasible.violation(candidate) is None:
            chosen.append(candidate)
    return chosen[:count]


def spearman(a: list[float], b: list[float]) -> float:
    """Rank correlation of two lists of times (no ties expected)."""
    ra = {i: r for r, i in enumerate(sorted(range(len(a)), key=a.__getitem__))}
    rb = {i: r for r, i in enumerate(sorted(range(len(b)), key=b.__getitem__))}
    n = len(a)
    if n < 2:
        return 1.0
    d2 = sum((ra[i] - rb[i]) ** 2 for i in range(n))
    return 1 - 6 * d2 / (n * (n * n - 1))


def run_sample(sample: str, count: int) -> dict[str, Any]:
    """Every chosen configuration in both modes at the decode sizes."""
    kernel, tokens, others = SAMPLES[sample]
    ctx = open_kernel(ROOT / "samples" / f"{sample}.cu", kernel)
    ctx = with_combined(ctx, variants_of(ctx))
    sizes = tuple({tokens: t, **others} for t in TOKENS)
    events_timing = TimingOptions(warmup=3, reps=30, min_time_ms=10.0)
    job = build_job(ctx, timing=events_timing)
    job = dataclasses.replace(job, spec=dataclasses.replace(job.spec, sizes=sizes, weights=()))
    graph_job = dataclasses.replace(job, timing=dataclasses.replace(events_timing, mode="graph"))
    configs = configs_of(job.space, Feasibility(job.space, job.spec, limits_for("sm_90")), count)
    events, graph = create_backend("cupy"), create_backend("cupy")  # each in its worker: a fault costs one row
    rows: list[dict[str, Any]] = []
    try:
        info_events, info_graph = events.open(job), graph.open(graph_job)
        for i, config in enumerate(configs):
            pair: list[Measurement] = []
            for backend in (events, graph) if i % 2 == 0 else (graph, events):
                pair.append(backend.evaluate(config))
            by_events, by_graph = pair if i % 2 == 0 else pair[::-1]
            if by_events.ok and by_graph.ok:
                rows.append(
                    {
                        "config": dict(config),
                        "events_us": [t.median_us for t in by_events.timings],
                        "graph_us": [t.median_us for t in by_graph.timings],
                    }
                )
    finally:
        events.close()
        graph.close()
    if not rows:
        raise SystemExit(f"{sample}: no configuration ran in both modes")
    per_size = []
    for j, size in enumerate(sizes):
        ev = [r["events_us"][j] for r in rows]
        gr = [r["graph_us"][j] for r in rows]
        best_ev = min(range(len(rows)), key=ev.__getitem__)
        best_gr = min(range(len(rows)), key=gr.__getitem__)
        per_size.append(
            {
                "size": size,
                "events_pick": rows[best_ev]["config"],
                "graph_pick": rows[best_gr]["config"],
                "same_pick": best_ev == best_gr,
                "rank_correlation": spearman(ev, gr),
                # picking by events when the kernel runs under graphs: its graph time over the graph pick's
                "events_pick_cost_under_graph": gr[best_ev] / gr[best_gr],
                "original_events_us": rows[0]["events_us"][j] if rows else None,
                "original_graph_us": rows[0]["graph_us"][j] if rows else None,
                "best_events_us": ev[best_ev],
                "best_graph_us": gr[best_gr],
            }
        )
    return {
        "kernel": kernel,
        "device": info_events.name,
        "floor_empty_launch_us": {"events": info_events.empty_launch_us, "graph": info_graph.empty_launch_us},
        "configs": len(rows),
        "per_size": per_size,
        "rows": rows,
    }


def markdown(report: dict[str, Any]) -> str:
    """A table per sample: per size, each mode's pick and time, and where they differ."""
    lines = [f"# Timing modes at decode sizes ({report['device']}, {report['date']})", ""]
    for sample, entry in report["samples"].items():
        floors = entry["floor_empty_launch_us"]
        lines += [
            f"## {sample} ({entry['configs']} configurations; empty launch {floors['events']:.2f} µs events, "
            f"{floors['graph']:.2f} µs graph)",
            "",
            "| size | original events / graph µs | best events µs | best graph µs | same pick | rank corr. | "
            "events pick under graph |",
            "|---|---|---|---|---|---|---|",
        ]
        for s in entry["per_size"]:
            size = ", ".join(f"{k}={v}" for k, v in s["size"].items())
            lines.append(
                f"| {size} | {s['original_events_us']:.2f} / {s['original_graph_us']:.2f} | {s['best_events_us']:.2f} "
                f"| {s['best_graph_us']:.2f} | {'yes' if s['same_pick'] else 'no'} | {s['rank_correlation']:.2f} "
                f"| {s['events_pick_cost_under_graph']:.3f}× |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Measure each sample in both modes and write the report."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--configs", type=int, default=24)
    ap.add_argument("--only", default=",".join(SAMPLES))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"date": datetime.date.today().isoformat(), "samples": {}}
    for sample in args.only.split(","):
        entry = run_sample(sample, args.configs)
        report["samples"][sample] = entry
        report["device"] = entry["device"]
        differ = [s["size"] for s in entry["per_size"] if not s["same_pick"]]
        print(f"{sample}: {entry['configs']} configs; picks differ at {differ or 'no size'}", flush=True)
    write_report(args.out, "timing_modes", report, markdown(report))


if __name__ == "__main__":
    main()
