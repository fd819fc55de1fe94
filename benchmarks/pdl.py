"""Programmatic dependent launch under graph timing: the RMSNorm sample tuned with PDL, against flashinfer's RMSNorm.

    python benchmarks/pdl.py OUT_DIR [--trials 40] [--seconds 120] [--repeats 5]
    python benchmarks/pdl.py --check      # CPU: the PDL kernel compiles (nvcc and NVRTC), the library's too

1. `cutune tune --timing graph` on samples/rms_norm.cu at 1, 8, 32 and 64 tokens of 8192 (bf16), through the
   workflow every front end uses (variants, PDL added under graph timing, selection against the original):
   per size the original, the tuned time, the confirmed speedup and the configuration chosen.
2. On one graph-timing backend, `--repeats` times alternating: the chosen configuration of each size with PDL off
   and on, the original, and flashinfer's RMSNormKernel<8, bf16> (flashinfer-python 0.6.0, read from its wheel
   with benchmarks/corpus_specs/flashinfer_rms_norm.tune.toml) launched without and with the attribute, as its
   RMSNorm does with `enable_pdl`. Times are medians of the repeats' medians.
Bar (#23): with PDL, the sample's 1- and 32-token sizes at least as fast as the best library time there.
Writes OUT_DIR/pdl.<device>.<date>.json and .md.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.corpus_variants import Entry, opened  # noqa: E402

from cutune.check import check_kernel  # noqa: E402
from cutune.gpu.backend import TimingOptions  # noqa: E402
from cutune.gpu.registry import create_backend  # noqa: E402
from cutune.project import KernelContext, build_job, open_kernel  # noqa: E402
from cutune.template.model import PDL, Config  # noqa: E402
from cutune.workflow.autotuning import autotune  # noqa: E402
from cutune.workflow.pdl import with_pdl  # noqa: E402
from cutune.workflow.request import TuneRequest  # noqa: E402
from cutune.workflow.variants import variants_of, with_combined  # noqa: E402

SIZES = tuple({"num_tokens": t, "hidden_size": 8192} for t in (1, 8, 32, 64))
BAR_TOKENS = (1, 32)
LIBRARY = Entry("RMSNorm", "flashinfer", "flashinfer/norm.cuh", "RMSNormKernel", "flashinfer_rms_norm.tune.toml")
GRAPH = TimingOptions(mode="graph")


def at_sizes(ctx: KernelContext) -> KernelContext:
    """`ctx` with the benchmark's sizes (no held-out sizes between them: the bar is about these)."""
    spec = ctx.require_spec()
    return dataclasses.replace(ctx, spec=dataclasses.replace(spec, sizes=SIZES, weights=()))


def sample() -> KernelContext:
    """The RMSNorm sample at the benchmark's sizes (tuning adds its variants, and PDL under graph timing)."""
    return at_sizes(open_kernel(ROOT / "samples" / "rms_norm.cu", "rms_norm_kernel"))


def library() -> KernelContext:
    """flashinfer's RMSNormKernel from its wheel, with the spec written here."""
    return at_sizes(opened(LIBRARY))


def check() -> None:
    """Compile the sample's original and PDL configurations (both compilers) and the library kernel."""
    ctx = sample()
    ctx = with_pdl(with_combined(ctx, variants_of(ctx)))
    pdl_ctx = dataclasses.replace(
        ctx,
        template=dataclasses.replace(ctx.template, space=ctx.space.varying(PDL)),
        spec=dataclasses.replace(ctx.require_spec(), space=None),
    )
    for compiler in ("nvrtc", "nvcc"):
        report = check_kernel(pdl_ctx, limit=2, compiler=compiler, arch="sm_90")
        print(compiler, [(r.config.get(PDL), r.compiler, r.problem or "ok") for r in report.rows])
    report = check_kernel(library(), limit=2, compiler="auto", arch="sm_90")
    print("flashinfer", [(r.config.get(PDL), r.compiler, r.problem or "ok") for r in report.rows])


def timed(ctx: KernelContext, configs: list[Config], repeats: int) -> list[list[float]]:
    """Each configuration's per-size graph time (µs), the median over `repeats` alternating passes."""
    backend = create_backend("cupy")
    runs: list[list[list[float]]] = [[] for _ in configs]
    try:
        backend.open(build_job(ctx, timing=GRAPH))
        for r in range(repeats):
            order = list(range(len(configs)))
            for i in order if r % 2 == 0 else order[::-1]:
                m = backend.evaluate(configs[i])
                if not m.ok:
                    raise SystemExit(f"{configs[i]}: {m.failure} {m.detail}")
                runs[i].append([t.median_us for t in m.timings])
    finally:
        backend.close()
    return [[statistics.median(col) for col in zip(*per, strict=True)] for per in runs]


def main() -> None:
    """Tune the sample under graph timing, then time its picks with PDL off and on beside the library."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    if args.check:
        check()
        return
    assert args.out is not None
    args.out.mkdir(parents=True, exist_ok=True)
    tuned = autotune(sample(), TuneRequest(trials=args.trials, seconds=args.seconds, timing=GRAPH, sanitize=False))
    result, ctx = tuned.result, tuned.prepared.context  # what was searched: variants and PDL
    picks = [s.best_config for s in result.sizes if not s.held_out]
    original = ctx.space.default()
    mine = [original]
    for pick in picks:
        for pdl in (False, True):
            c = Config.of({**pick, PDL: pdl})
            if c not in mine:
                mine.append(c)
    times = timed(ctx, mine, args.repeats)
    lib_configs = [Config.of({PDL: False}), Config.of({PDL: True})]
    lib = timed(library(), lib_configs, args.repeats)
    rows = []
    for j, size in enumerate(SIZES):
        s = next(x for x in result.sizes if x.size == size)
        pick = s.best_config
        off = times[mine.index(Config.of({**pick, PDL: False}))][j]
        on = times[mine.index(Config.of({**pick, PDL: True}))][j]
        rows.append(
            {
                "size": size,
                "tune_original_us": s.original.median_us,
                "tune_tuned_us": s.tuned.median_us,
                "tune_speedup": s.speedup,
                "significant": s.significant,
                "pick": dict(pick),
                "original_us": times[0][j],
                "pick_pdl_off_us": off,
                "pick_pdl_on_us": on,
                "library_us": lib[0][j],
                "library_pdl_us": lib[1][j],
            }
        )
    device = result.device or "unknown"
    report: dict[str, Any] = {
        "device": device,
        "date": datetime.date.today().isoformat(),
        "library": "flashinfer-python 0.6.0 RMSNormKernel<8, __nv_bfloat16>",
        "timing": "graph (32 back-to-back launches per repetition, rotated inputs)",
        "tune": {
            "trials": args.trials,
            "seconds": args.seconds,
            "phases": result.phases,
            "per_file": dict(result.per_file),
        },
        "rows": rows,
    }
    report["bar_met"] = all(
        r["pick_pdl_on_us"] <= min(r["library_us"], r["library_pdl_us"])
        for r in rows
        if r["size"]["num_tokens"] in BAR_TOKENS
    )
    stem = f"pdl.{device.replace(' ', '-')}.{report['date']}"
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    lines = [
        f"# PDL under graph timing: RMSNorm sample vs {report['library']} ({device}, {report['date']})",
        "",
        f"Tune: {args.trials} trials / {args.seconds:g} s, chosen once for the file: {dict(result.per_file)}",
        "",
        "| size | tune: original → tuned µs (speedup) | original µs | pick, PDL off | pick, PDL on | library | "
        "library + PDL | pick |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        size = f"{r['size']['num_tokens']}×{r['size']['hidden_size']}"
        lines.append(
            f"| {size} | {r['tune_original_us']:.2f} → {r['tune_tuned_us']:.2f} ({r['tune_speedup']:.2f}×"
            f"{'' if r['significant'] else ', not significant'}) | {r['original_us']:.2f} | {r['pick_pdl_off_us']:.2f} "
            f"| {r['pick_pdl_on_us']:.2f} | {r['library_us']:.2f} | {r['library_pdl_us']:.2f} | {r['pick']} |"
        )
    lines += ["", f"Bar (1 and 32 tokens, PDL pick ≤ best library time): {'met' if report['bar_met'] else 'NOT met'}"]
    (args.out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
