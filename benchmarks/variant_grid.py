"""What a variant reaches on corpus kernels when a search finds its best configuration: the original, then every
configuration of the variant's grid (flat_rows: threads per row × columns at once × blocks per SM; group_items:
elements per thread × locals kept × lanes apart; row_cache, alone or under online_merge: rounds kept in registers;
block_items: items a block × items a row of threads; thread_packs_block_items: the same × packed or not;
row_reduce: threads a row × elements an access × rows a block × a persistent loop's workers × packs kept in
registers, where it has them; row_reduce_block_items: threads a row × rows a block × packs kept in registers),
at 64- and 32-bit indices where index_bits applies, each checked against the original's output and timed at every
size of the kernel's spec (events, L2 flushed). A short search samples a few of these among thousands of
configurations; this sweep says what the variant itself is worth, the search apart.

    python benchmarks/variant_grid.py OUT_DIR [--variant flat_rows] [--only k_set_rows,FILE.cu:KERNEL]
        [--fix NAME=VALUE ...] [--values NAME=A,B,... ...]

(a corpus kernel of corpus_variants' table by name, a sample as FILE:KERNEL)
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.corpus_variants import TABLE, opened  # noqa: E402

from cutune.gpu.backend import TimingOptions  # noqa: E402
from cutune.gpu.registry import create_backend  # noqa: E402
from cutune.project import build_job, open_kernel  # noqa: E402
from cutune.template.model import Config, Value  # noqa: E402
from cutune.template.recipes.index_bits import NAME as INDEX_BITS  # noqa: E402
from cutune.template.variants import (  # noqa: E402
    VARIANT,
    block_items,
    combine_all,
    flat_rows,
    group_items,
    row_cache,
    row_reduce,
    thread_packs,
)

GRIDS: dict[str, dict[str, tuple[int, ...]]] = {
    "flat_rows": {
        flat_rows.ROW_THREADS: (32, 128, 256),
        flat_rows.ITEMS: (1, 4, 8),
        flat_rows.SPLIT: (1, 4, 16),
        flat_rows.BLOCKS_PER_SM: (4, 16),
    },
    "group_items": {group_items.ITEMS: (2, 4, 8), group_items.KEEP: (0, 1), group_items.STRIDED: (0, 1)},
    "row_cache": {row_cache.ROUNDS: (1, 2, 4, 8, 16, 32)},
    "online_merge_row_cache": {row_cache.ROUNDS: (0, 1, 2, 4, 8, 16, 32)},  # 0: the online merge alone
    "block_items": {block_items.ITEMS: (1, 2, 4, 8), block_items.ITEMS_T: (1, 2, 4, 8)},
    "thread_packs_block_items": {
        block_items.ITEMS: (1, 2, 4, 8),
        block_items.ITEMS_T: (1, 2, 4, 8),
        thread_packs.PACKS: (0, 1),
    },
    "row_reduce": {
        row_reduce.THREADS: (8, 16, 32, 64, 128, 256),
        row_reduce.VEC: (1, 2, 4),
        row_reduce.ROWS: (1, 2, 4, 8),
        row_reduce.WORKERS: (1, 2, 4, 8, 16),  # a persistent row loop's only
        row_reduce.CAP: (0, 2, 4, 8),  # a run-time length's only
    },
    "row_reduce_block_items": {
        row_reduce.THREADS: (8, 16, 32, 64, 128),
        row_reduce.VEC: (4,),
        block_items.ITEMS: (1, 2, 4, 8),
        row_reduce.CAP: (0, 2, 4, 8),  # a run-time length's only
    },
}


def sweep(
    target: str, variant: str, fixed: dict[str, Value] | None = None, values: dict[str, tuple[int, ...]] | None = None
) -> dict[str, object]:
    """The original's and every grid configuration's median per size, or its failure; `fixed` parameters at the
    values given, out of the grid (the original keeps those that are not the variant's own); `values` the grid's
    values of a parameter in place of GRIDS' own."""
    file, _, kernel = target.rpartition(":")
    ctx = open_kernel(ROOT / "samples" / file, kernel) if file else opened(next(e for e in TABLE if e.kernel == kernel))
    combined = combine_all(ctx.template_model, kernel, ctx.template, ctx.spec)
    k = 1 + [v.name for v in combined.variants].index(variant)
    ctx = dataclasses.replace(ctx, template=combined.template, template_model=combined.model, spec=combined.spec)
    default = ctx.space.default()
    bits = (64, 32) if INDEX_BITS in default else (64,)
    backend = create_backend("cupy")
    backend.open(build_job(ctx, timing=TimingOptions(warmup=3, reps=20, min_time_ms=10.0)))
    rows: list[dict[str, object]] = []
    fixed = fixed or {}
    grid = {
        name: (values or {}).get(name, own_values)
        for name, own_values in GRIDS[variant].items()
        if name in default and name not in fixed
    }
    try:
        own = {p.name for p in combined.variants[k - 1].params}
        configs = [{**default, **{n: v for n, v in fixed.items() if n not in own}, VARIANT: 0}] + [
            {**default, **fixed, VARIANT: k, **dict(zip(grid, picked, strict=True))}
            | ({INDEX_BITS: b} if INDEX_BITS in default else {})
            for picked in itertools.product(*grid.values())
            for b in bits
        ]
        for values in configs:
            measured = backend.evaluate(Config.of(values))
            rows.append(
                {
                    "config": {n: values[n] for n in (VARIANT, *grid, *fixed, INDEX_BITS) if n in values},
                    "medians_us": [t.median_us for t in measured.timings] if measured.ok else None,
                    "failure": None if measured.ok else f"{measured.failure}: {measured.detail[:200]}",
                }
            )
            print(rows[-1], flush=True)
    finally:
        backend.close()
    sizes = [dict(s) for s in ctx.require_spec().sizes]
    return {"kernel": kernel, "file": str(ctx.path), "sizes": sizes, "rows": rows}


def main() -> None:
    """Sweep each chosen kernel and write the medians."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--variant", choices=sorted(GRIDS), default="flat_rows")
    ap.add_argument("--only", default="k_set_rows,unary_gated_op_kernel")
    ap.add_argument("--fix", action="append", default=[], help="NAME=VALUE: a parameter the variant keeps (repeatable)")
    ap.add_argument("--values", action="append", default=[], help="NAME=A,B,...: the grid's values of NAME")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    fixed = {name: json.loads(value) for name, _, value in (f.partition("=") for f in args.fix)}
    values = {name: tuple(int(v) for v in vs.split(",")) for name, _, vs in (f.partition("=") for f in args.values)}
    results = [sweep(kernel, args.variant, fixed, values) for kernel in args.only.split(",")]
    stem = f"{args.variant}_grid.{datetime.date.today().isoformat()}"
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=1))
    lines = []
    for r in results:
        original = r["rows"][0]["medians_us"]  # type: ignore[index]
        best = [
            min((row for row in r["rows"] if row["medians_us"]), key=lambda row: row["medians_us"][i])  # type: ignore
            for i in range(len(original))
        ]
        lines.append(f"## {r['kernel']}")
        for i, (size, b) in enumerate(zip(r["sizes"], best, strict=True)):  # type: ignore[call-overload]
            lines.append(f"{size}: original {original[i]:.1f} µs, best {b['medians_us'][i]:.1f} µs {b['config']}")
    (args.out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
