"""What flat_rows reaches on corpus kernels when a search finds its best configuration: the original, then every
flat_rows configuration of a grid (threads per row × columns at once × blocks per SM, at 64- and 32-bit indices
where index_bits applies), each checked against the original's output and timed at every size of the kernel's spec
(events, L2 flushed). A short search samples a few of these among thousands of configurations; this sweep says
what the variant itself is worth, the search apart.

    python benchmarks/flat_rows_grid.py OUT_DIR [--only k_set_rows,strided_copy.cu:strided_copy_kernel]

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
from cutune.template.model import Config  # noqa: E402
from cutune.template.recipes.index_bits import NAME as INDEX_BITS  # noqa: E402
from cutune.template.variants import VARIANT, combine_all  # noqa: E402
from cutune.template.variants.flat_rows import BLOCKS_PER_SM, ITEMS, ROW_THREADS, SPLIT  # noqa: E402

GRID = {ROW_THREADS: (32, 128, 256), ITEMS: (1, 4, 8), SPLIT: (1, 4, 16), BLOCKS_PER_SM: (4, 16)}


def sweep(target: str) -> dict[str, object]:
    """The original's and every grid configuration's median per size, or its failure."""
    file, _, kernel = target.rpartition(":")
    ctx = open_kernel(ROOT / "samples" / file, kernel) if file else opened(next(e for e in TABLE if e.kernel == kernel))
    combined = combine_all(ctx.template_model, kernel, ctx.template, ctx.spec)
    k = 1 + [v.name for v in combined.variants].index("flat_rows")
    ctx = dataclasses.replace(ctx, template=combined.template, template_model=combined.model, spec=combined.spec)
    default = ctx.space.default()
    bits = (64, 32) if INDEX_BITS in default else (64,)
    backend = create_backend("cupy")
    backend.open(build_job(ctx, timing=TimingOptions(warmup=3, reps=20, min_time_ms=10.0)))
    rows: list[dict[str, object]] = []
    try:
        configs = [{**default, VARIANT: 0}] + [
            {**default, VARIANT: k, ROW_THREADS: rt, ITEMS: items, SPLIT: split, BLOCKS_PER_SM: blocks}
            | ({INDEX_BITS: b} if INDEX_BITS in default else {})
            for rt, items, split, blocks in itertools.product(*GRID.values())
            for b in bits
        ]
        for values in configs:
            measured = backend.evaluate(Config.of(values))
            rows.append(
                {
                    "config": {
                        n: values[n]
                        for n in (VARIANT, ROW_THREADS, ITEMS, SPLIT, BLOCKS_PER_SM, INDEX_BITS)
                        if n in values
                    },
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
    ap.add_argument("--only", default="k_set_rows,unary_gated_op_kernel")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = [sweep(kernel) for kernel in args.only.split(",")]
    stem = f"flat_rows_grid.{datetime.date.today().isoformat()}"
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=1))
    lines = []
    for r in results:
        original = r["rows"][0]["medians_us"]  # type: ignore[index]
        best = [
            min((row for row in r["rows"] if row["medians_us"]), key=lambda row: row["medians_us"][i])  # type: ignore
            for i in range(len(original))
        ]
        lines.append(f"## {r['kernel']}")
        for i, (size, b) in enumerate(zip(r["sizes"], best, strict=True)):  # type: ignore[arg-type]
            lines.append(f"{size}: original {original[i]:.1f} µs, best {b['medians_us'][i]:.1f} µs {b['config']}")
    (args.out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
