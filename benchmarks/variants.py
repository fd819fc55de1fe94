"""Tune the samples with their structural variants on the GPU and check issue #9's bar.

    python benchmarks/variants.py OUT_DIR [--trials 40] [--seconds 45]

For each sample: templatize, try every transform, search (variant, configuration) pairs through the
combined template (the original is VARIANT = 0 and always measured), re-measure the winners interleaved
with the original, and record per size: original and tuned time, speedup, % of the speed-of-light floor,
bytes moved and the winning variant. Writes OUT_DIR/variants.<device>.<date>.json and .md. The bar (#9):
geomean ≥ 1.5× on each new sample, ≥ 85% of the floor at every size moving ≥ 64 MB, never slower; no
regression on the existing samples.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import logging
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna

from cutune.gpu.registry import create_backend
from cutune.project import KernelContext, build_job, open_kernel, tune_options
from cutune.template.variants import VARIANT, combine_all
from cutune.tune.options import TuneOptions
from cutune.tune.run import tune

ROOT = Path(__file__).resolve().parents[1]
NEW = [
    ("gated_activation.cu", "act_and_mul_kernel"),
    ("rotary_embedding.cu", "rotary_embedding_kernel"),
    ("rms_norm.cu", "rms_norm_kernel"),
    ("fused_add_rms_norm.cu", "fused_add_rms_norm_kernel"),
]
EXISTING = [("silu_and_mul.cu", "silu_and_mul_kernel"), ("merge_attn_states.cu", "merge_attn_states_kernel")]
# flat indices split by division (issue #21's flat_rows), measured the same way
FLAT = [
    ("strided_copy.cu", "strided_copy_kernel"),
    ("strided_copy.cu", "scale_bias_residual_kernel"),
    ("bias_gelu.cu", "bias_gelu_kernel"),  # `bias[i % d]` inside an expression
]
# norms over pack structs (issue #21's hand-vectorised forms), one quantising to int8 value by value
PACKED = [
    ("packed_add_rms_norm.cu", "packed_add_rms_norm_kernel"),
    ("packed_add_rms_norm.cu", "packed_add_rms_norm_quant_kernel"),
    ("arch_guard_rms_norm.cu", "arch_guard_rms_norm_kernel"),
]
# a helper's branch on a template parameter, packed arm by arm (issue #21: the rotary layouts of serving stacks)
ARMS = [("rotary_styles.cu", "rotary_styles_kernel")]
# one element per thread checked by its row, the flat index divided by the row length (issue #21's quotient guards)
QUOTIENT = [("masked_rows.cu", "masked_row_scale_kernel"), ("masked_rows.cu", "column_bias_copy_kernel")]
# helpers that return early, inlined (issue #21: the device functions a kernel calls)
EARLY = [("expert_ids.cu", "map_expert_ids_kernel"), ("expert_ids.cu", "count_expert_tokens_kernel")]
# a grid-stride loop whose first statement leaves on a batch or channel past the tensor's (issue #21: exits moved
# before the loop)
HOISTED = [("batched_points.cu", "gather_points_kernel"), ("batched_points.cu", "three_interpolate_kernel")]
BIG = 64 * 2**20  # bytes: from here on the bar asks for 85% of the floor


def log_selection(path: Path) -> None:
    """Why a size keeps the original (the selection's per-size verdicts), what became of each finalist's twin,
    and the search's probe rounds, written to `path` beside the tables."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    for name in ("cutune.tune.select", "cutune.tune.run", "cutune.tune.search"):
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.DEBUG)


def run_one(file: str, kernel: str, trials: int, seconds: float) -> dict[str, object]:
    """Tune one sample with its variants; its per-size rows and the bar's verdicts."""
    return measure(open_kernel(ROOT / "samples" / file, kernel), file, trials, seconds)


def measure(
    ctx: KernelContext, file: str, trials: int, seconds: float, *, quick: TuneOptions | None = None
) -> dict[str, object]:
    """Tune one opened kernel (its spec loaded) with its variants; its per-size rows and the bar's verdicts.
    `quick` (its selection and sanitize settings) shortens the final phases for a short budget."""
    kernel = ctx.kernel.name
    spec = ctx.require_spec()
    combined = combine_all(ctx.template_model, kernel, ctx.template, ctx.spec)
    ctx = dataclasses.replace(ctx, template=combined.template, template_model=combined.model, spec=combined.spec)
    names = ["original", *(v.name for v in combined.variants)]
    with tempfile.TemporaryDirectory() as workspace:  # a fresh study each run
        options = dataclasses.replace(tune_options(ctx, trials=trials, seconds=None), workspace=Path(workspace))
        # --seconds is the search's budget here, as before `tune` bounded the whole run
        options = dataclasses.replace(options, budget=dataclasses.replace(options.budget, search_seconds=seconds))
        if quick is not None:
            options = dataclasses.replace(options, selection=quick.selection, sanitize=quick.sanitize)
        start = time.perf_counter()
        result = tune(build_job(ctx), create_backend("cupy"), options)
        wall = time.perf_counter() - start
    rows = []
    for s in result.sizes:
        moved = spec.moved_bytes(s.size)
        rows.append(
            {
                "size": s.size,
                "bytes_moved": moved,
                "original_us": s.original.median_us,
                "tuned_us": s.tuned.median_us,
                "speedup": s.speedup,
                "pct_of_floor": s.pct_of_sol,
                "variant": names[int(s.best_config.get(VARIANT, 0))],
                "config": dict(s.best_config),
                "significant": s.significant,
            }
        )
    geomean = math.exp(sum(math.log(s.speedup) for s in result.sizes) / len(result.sizes))
    big = [s.pct_of_sol or 0.0 for s in result.sizes if (spec.moved_bytes(s.size) or 0) >= BIG]
    return {
        "file": file,
        "kernel": kernel,
        "device": result.device,
        "variants": [
            {"name": v.name, "origin": v.provenance.origin, "params": [p.name for p in v.params]}
            for v in combined.variants
        ],
        "refusals": [{"transform": r.recipe, "reason": r.reason} for r in combined.refusals],
        "trials": result.trials,
        "failures": result.failures,
        "wall_seconds": wall,
        "geomean": geomean,
        "rows": rows,
        "never_slower": all(s.speedup >= 0.99 for s in result.sizes),
        "min_pct_big": min(big, default=None),
        "result": result.to_dict(),
    }


def markdown(samples: list[dict[str, object]], device: str, date: str) -> str:
    """The results as tables, one per sample, with the bar's verdicts."""
    lines = [f"# Structural variants on {device}, {date}", "", "Measured with `benchmarks/variants.py` (L2 flushed)."]
    for s in samples:
        new = (s["file"], s["kernel"]) in NEW
        bar = ""
        if new:
            pct = s["min_pct_big"]
            bar = (
                f"geomean {s['geomean']:.2f}× (bar 1.5×: {'met' if s['geomean'] >= 1.5 else 'NOT met'}); "  # type: ignore[operator]
                f"min % of floor at ≥ 64 MB: {'-' if pct is None else f'{pct:.0f}%'} "
                f"(bar 85%: {'met' if pct is None or pct >= 85 else 'NOT met'}); "  # type: ignore[operator]
                f"never slower: {'yes' if s['never_slower'] else 'NO'}"
            )
        else:
            bar = f"geomean {s['geomean']:.2f}×; no regression: {'yes' if s['never_slower'] else 'NO'}"
        lines += ["", f"## {s['kernel']} ({s['file']})", "", bar, ""]
        lines.append(f"variants: {', '.join(v['name'] for v in s['variants']) or 'none'}; trials {s['trials']}")  # type: ignore[attr-defined]
        lines += ["", *size_table(s["rows"])]  # type: ignore[arg-type]
    return "\n".join(lines) + "\n"


def size_table(rows: list[dict[str, Any]]) -> list[str]:
    """One markdown row per size: bytes moved, original and tuned times, speedup, % of the floor, variant."""
    lines = [
        "| size | MB | original µs | tuned µs | speedup | % of floor | variant |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        size = ", ".join(f"{k}={v}" for k, v in r["size"].items())
        pct = "-" if r["pct_of_floor"] is None else f"{r['pct_of_floor']:.0f}"
        lines.append(
            f"| {size} | {r['bytes_moved'] / 1e6:.1f} | {r['original_us']:.1f} | {r['tuned_us']:.1f} | "
            f"{r['speedup']:.2f}× | {pct} | {r['variant']} |"
        )
    return lines


def main() -> None:
    """Tune every sample with variants and write the tables."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--seconds", type=float, default=45.0)
    ap.add_argument("--only", default="", help="comma-separated kernel names (default: all)")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    log_selection(args.out / "variants.selection.log")
    chosen = [
        (f, k)
        for f, k in NEW + EXISTING + FLAT + PACKED + ARMS + QUOTIENT + EARLY + HOISTED
        if not args.only or k in args.only.split(",")
    ]
    samples = []
    for file, kernel in chosen:
        if not (ROOT / "samples" / file).exists():
            print(f"skipped {file}: not in samples/")
            continue
        try:
            samples.append(run_one(file, kernel, args.trials, args.seconds))
        except Exception as e:  # one sample's failure must not lose the others' numbers
            print(f"{kernel}: failed: {type(e).__name__}: {e}")
            continue
        s = samples[-1]
        print(f"{kernel}: geomean {s['geomean']:.2f}×, min % floor ≥64MB {s['min_pct_big']}, {s['wall_seconds']:.0f} s")
        write(args.out, samples)  # after each sample: a run cut short keeps what it measured


def write(out: Path, samples: list[dict[str, object]]) -> None:
    """The JSON and Markdown files, named by device and date."""
    device = str(samples[0]["device"])
    date = datetime.date.today().isoformat()
    stem = f"variants.{device.replace(' ', '-')}.{date}"
    (out / f"{stem}.json").write_text(json.dumps({"device": device, "date": date, "samples": samples}, indent=1))
    (out / f"{stem}.md").write_text(markdown(samples, device, date))


if __name__ == "__main__":
    main()
