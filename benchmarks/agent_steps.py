"""The built-in agent on each #7 sample's original, on a GPU: does it reach ≥ 85% of the floor at ≥ 64 MB?

Runs the measured loop (built-in transforms only: propose → check → tune briefly → analyse → ncu → plan)
from each sample's original kernel, with a fresh study storage, and records every step (what changed,
why, per-size % of the floor, speedup, registers, ncu counters) to
`<out>/agent_steps.<device>.<date>.json` and a Markdown table beside it.

    source scripts/gpu-env.sh && python3 benchmarks/agent_steps.py --out $OUT
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cutune.agent.sources import BuiltinVariants
from cutune.agent.steps import LoopOptions, LoopRun, combined_context, pct_of_floor, run_loop
from cutune.gpu.backend import TimingOptions
from cutune.gpu.profile import ProfileError, profile_config
from cutune.gpu.registry import create_backend
from cutune.project import build_job, open_kernel, tune_options

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = {
    "rms_norm.cu": "rms_norm_kernel",
    "fused_add_rms_norm.cu": "fused_add_rms_norm_kernel",
    "gated_activation.cu": "act_and_mul_kernel",
    "rotary_embedding.cu": "rotary_embedding_kernel",
}
TARGET = 85.0
LARGE = 64 * 2**20


def run_sample(path: Path, kernel: str, storage: str, args: argparse.Namespace) -> dict[str, Any]:
    """One sample's loop and its verdict."""
    ctx = open_kernel(path, kernel)
    spec = ctx.require_spec()
    # the built-in transforms do not read the profile: ncu runs once, on the final best configuration
    options = LoopOptions(
        max_steps=args.steps, seconds=args.seconds, target_pct=TARGET, trials=args.trials, profile=False
    )
    started = time.monotonic()
    run: LoopRun = run_loop(
        ctx,
        BuiltinVariants(),
        lambda: create_backend("cupy"),
        tune_options(ctx, trials=args.trials, seconds=None, storage_url=storage),
        options,
        timing=TimingOptions(reps=10, min_time_ms=5.0, max_reps=200),
        on_step=lambda r: print(r.render(), flush=True),
    )
    final = pct_of_floor(run.result) if run.result is not None else {}
    large = {
        " ".join(f"{k}={v}" for k, v in s.size.items())
        for s in (run.result.sizes if run.result else ())
        if (spec.moved_bytes(s.size) or 0) >= LARGE
    }
    worst = min((final[label] for label in large if label in final), default=None)
    profile: dict[str, Any] | str = "not profiled (--no-profile)"
    if run.result is not None and not args.no_profile:
        combined = combined_context(ctx, run.kept) if run.kept else ctx
        try:
            profile = profile_config(build_job(combined), run.result.best, backend="cupy", options={}).to_dict()
        except ProfileError as e:
            profile = str(e)
    return {
        "sample": path.name,
        "kernel": kernel,
        "device": run.result.device if run.result else "",
        "stop": run.stop.value,
        "message": run.message,
        "kept": [v.name for v in run.kept],
        "pct_of_floor": final,
        "large_sizes": sorted(large),
        "worst_large_pct": worst,
        "reached": worst is not None and worst >= TARGET,
        "seconds": time.monotonic() - started,
        "profile": profile,
        "steps": [r.to_dict() for r in run.records],
    }


def markdown(rows: list[dict[str, Any]], device: str, date: str) -> str:
    """A table: sample, variants kept, % of floor at the large sizes, verdict."""
    lines = [
        f"# Built-in agent from each sample's original — {device}, {date}",
        "",
        f"Target: ≥ {TARGET:g}% of the speed-of-light floor at every size moving ≥ 64 MB (best config per size).",
        "",
        "| sample | steps | variants kept | worst % of floor (≥ 64 MB) | reached | stop |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        worst = "-" if r.get("worst_large_pct") is None else f"{r['worst_large_pct']:.0f}%"
        kept = ", ".join(r.get("kept", [])) or "none"
        lines.append(
            f"| {r['sample']} | {len(r.get('steps', []))} | {kept} | {worst} | "
            f"{'yes' if r.get('reached') else 'no'} | {r.get('stop', r.get('error', ''))} |"
        )
    return "\n".join(lines) + "\n"


def write(rows: list[dict[str, Any]], out: Path) -> tuple[str, str]:
    """Write the JSON and Markdown records (device and date in their names); the device and date."""
    device = next((r["device"] for r in rows if r.get("device")), "unknown-device")
    date = datetime.date.today().isoformat()
    stem = f"agent_steps.{re.sub(r'[^A-Za-z0-9]+', '-', device).strip('-')}.{date}"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps({"device": device, "date": date, "samples": rows}, indent=2))
    (out / f"{stem}.md").write_text(markdown(rows, device, date))
    return device, date


def main() -> int:
    """Run every present sample; write the JSON and Markdown records."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument(
        "--seconds",
        type=float,
        default=40.0,
        help="per sample: the whole loop's time budget, every step and tune included",
    )
    parser.add_argument("--no-profile", action="store_true", help="skip the final ncu profile of each sample")
    parser.add_argument("--only", action="append", choices=sorted(SAMPLES), help="these samples (default: all)")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        storage = f"sqlite:///{Path(tmp) / 'agent.db'}"  # fresh: every sample starts from its original
        for name, kernel in SAMPLES.items():
            if args.only and name not in args.only:
                continue
            path = ROOT / "samples" / name
            if not path.is_file():
                print(f"{name}: not in samples/ yet, skipped", flush=True)
                rows.append({"sample": name, "kernel": kernel, "error": "missing sample"})
                continue
            print(f"== {name} ({kernel})", flush=True)
            try:
                rows.append(run_sample(path, kernel, storage, args))
            except Exception as e:  # one sample's failure must not lose the others' records
                print(f"{name}: {type(e).__name__}: {e}", flush=True)
                rows.append({"sample": name, "kernel": kernel, "error": f"{type(e).__name__}: {e}"})
            write(rows, args.out)  # after every sample: a run cut short keeps what it measured
    print(markdown(rows, *write(rows, args.out)))
    return 0 if rows and all(r.get("reached") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
