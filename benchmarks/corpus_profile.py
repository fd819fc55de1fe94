"""Nsight Compute counters of corpus kernels at their largest size: the original and the best configurations the
searches and sweeps of `benchmarks/results/` found, each run once under ncu (cutune.gpu.profile). Says where the
time goes in kernels still far from the floor: DRAM throughput against issue slots busy, occupancy, top stalls.

    python benchmarks/corpus_profile.py OUT_DIR [--only quantize_q8_1,unary_gated_op_kernel]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.corpus_variants import TABLE, opened  # noqa: E402

from cutune.errors import CutuneError  # noqa: E402
from cutune.gpu.backend import TimingOptions  # noqa: E402
from cutune.gpu.profile import profile_config  # noqa: E402
from cutune.project import build_job  # noqa: E402
from cutune.template.model import Config  # noqa: E402
from cutune.template.variants import VARIANT, combine_all  # noqa: E402

# (label, variant name or "" for the original, parameters over the space's defaults): the best configurations of
# corpus_variants run 11 (quantize_q8_1), run 26 (unary_gated_op_kernel, vectorized), flat_rows_grid run 18 and
# corpus_variants runs 75 and 82 (dequantize_block_q4_K) and 85 (dequantize_block_q5_K, dequantize_block_q6_K)
PROFILED: dict[str, list[tuple[str, str, dict[str, object]]]] = {
    "quantize_q8_1": [
        ("original", "", {}),
        ("group_items 4", "group_items", {"GROUP_ITEMS": 4, "GROUP_KEEP": 1, "INDEX_BITS": 32, "SPECIALIZE_NE2": True}),
        ("group_items 8", "group_items", {"GROUP_ITEMS": 8, "GROUP_KEEP": 1, "INDEX_BITS": 32, "SPECIALIZE_NE2": True}),
        (  # lanes 8 apart: a quarter of the float sum's shuffles (run 84: slower here all the same)
            "group_items 4 strided",
            "group_items",
            {"GROUP_ITEMS": 4, "GROUP_KEEP": 1, "GROUP_STRIDED": 1, "INDEX_BITS": 32, "SPECIALIZE_NE2": True},
        ),
    ],
    "unary_gated_op_kernel": [
        ("original", "", {}),
        ("vectorized", "vectorized", {"VEC_BYTES": 16, "INDEX_BITS": 32}),
        (
            "flat_rows",
            "flat_rows",
            {"FLAT_ROW_THREADS": 256, "FLAT_ITEMS": 1, "FLAT_SPLIT": 4, "FLAT_BLOCKS_PER_SM": 16},
        ),
        (
            "flat_rows 8",
            "flat_rows",
            {"FLAT_ROW_THREADS": 256, "FLAT_ITEMS": 8, "FLAT_SPLIT": 1, "FLAT_BLOCKS_PER_SM": 4},
        ),
    ],
    "k_set_rows": [
        ("original", "", {}),
        ("flat_rows", "flat_rows", {"FLAT_ROW_THREADS": 32, "FLAT_ITEMS": 8, "FLAT_SPLIT": 1, "FLAT_BLOCKS_PER_SM": 4}),
    ],
    "OnlineSoftmaxFusedKernel": [("original", "", {}), ("online_merge", "online_merge", {})],
    # corpus_variants run 75's pick at 150 MB, then run 82's
    "dequantize_block_q4_K": [
        ("original", "", {}),
        # block_items alone is now thread_packs_block_items at THREAD_PACKS 0 (block_items chains onto it)
        ("block_items 4", "thread_packs_block_items", {"ITEMS_Y": 4, "INDEX_BITS": 32, "THREAD_PACKS": 0}),
        ("thread_packs_block_items 4", "thread_packs_block_items", {"ITEMS_Y": 4, "THREAD_PACKS": 1}),
    ],
    # corpus_variants run 85's picks at 158 and 166 MB
    "dequantize_block_q5_K": [("original", "", {}), ("block_items 2", "block_items", {"ITEMS_Y": 2})],
    "dequantize_block_q6_K": [("original", "", {}), ("block_items 4", "block_items", {"ITEMS_Y": 4})],
    # corpus_variants run 122's pick at kv = 100 (47% of the floor), and row_reduce alone at it
    "soft_max_f32": [
        ("original", "", {}),
        ("row_reduce", "row_reduce", {"ROW_THREADS": 32, "ROW_VEC": 4, "FAST_MATH": True}),
        (
            "row_reduce_block_items 4",
            "row_reduce_block_items",
            {"ROW_THREADS": 32, "ROW_VEC": 4, "ITEMS_Y": 4, "FAST_MATH": True, "MAXRREGCOUNT": 168},
        ),
    ],
}


def profile(kernel: str) -> list[dict[str, object]]:
    """Each configuration of `kernel` in PROFILED profiled at the spec's largest size (or its failure)."""
    entry = next(e for e in TABLE if e.kernel == kernel)
    ctx = opened(entry)
    combined = combine_all(ctx.template_model, kernel, ctx.template, ctx.spec)
    ctx = dataclasses.replace(ctx, template=combined.template, template_model=combined.model, spec=combined.spec)
    names = [v.name for v in combined.variants]
    default = ctx.space.default()
    job = build_job(ctx, timing=TimingOptions(warmup=0, reps=1, min_time_ms=0.0))
    rows: list[dict[str, object]] = []
    for label, variant, values in PROFILED[kernel]:
        config = {**default, **{k: v for k, v in values.items() if k in default}}
        if variant and variant not in names:  # the transforms no longer propose it: said, the rest still profiled
            rows.append({"label": label, "config": config, "failure": f"no variant {variant} (only {names})"})
            print(kernel, rows[-1], flush=True)
            continue
        config[VARIANT] = 1 + names.index(variant) if variant else 0
        try:
            found = profile_config(job, Config.of(config), backend="cupy", options={})
            rows.append({"label": label, **found.to_dict()})
        except CutuneError as e:
            rows.append({"label": label, "config": config, "failure": str(e)[:400]})
        print(kernel, rows[-1], flush=True)
    return rows


def main() -> None:
    """Profile each chosen kernel's configurations and write the counters."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", default=",".join(PROFILED))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = {kernel: profile(kernel) for kernel in args.only.split(",")}
    stem = f"corpus_profile.{datetime.date.today().isoformat()}"
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=1, default=str))
    lines = []
    for kernel, rows in results.items():
        lines += [
            f"## {kernel}",
            "",
            "| configuration | µs | DRAM % | issue % | warp instr. | occupancy % | regs | top stalls |",
        ]
        lines.append("|---|---|---|---|---|---|---|---|")
        for r in rows:
            if "failure" in r:
                lines.append(f"| {r['label']} | failed: {r['failure']} |  |  |  |  |  |  |")
                continue
            stalls = ", ".join(f"{n} {v:.1f}" for n, v in r["stalls"])  # type: ignore[attr-defined]
            cells = [r.get(k) for k in ("duration_us", "dram_pct", "issue_pct", "instructions", "occupancy_pct")]
            text = " | ".join("?" if c is None else f"{c:.4g}" for c in cells)  # type: ignore[str-format]
            lines.append(f"| {r['label']} | {text} | {r['registers']} | {stalls} |")
        lines.append("")
    (args.out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
