"""Why two selections of the same finalists confirm per-size speedups up to 3% apart at few-µs sizes, although
they pick the same configuration at every size (selection_cost run 9, H200, rms_norm at 333×4096: 1.771, 1.792,
1.741): each run opens its own backend, so is it the measurement in one open, or something an open fixes?

    python -m benchmarks.reopen_spread OUT_DIR [--only rms_norm] [--repeats 6] [--rounds 5]

The same original and candidates (the winners of selection_cost run 9, over the sample's structural variants),
measured by the selection's own `measure_rounds` (A c1 A c2 A), `--repeats` times:
- `same open`: on one backend, opened once (one set of device buffers, one loaded module per configuration);
- `reopen`: on a fresh backend each time, as two `tune` runs do (new buffers at new addresses, modules reloaded).
Each under event timing (single launches after an L2 flush, the default) and graph timing (back-to-back
launches over rotated input copies); and two hypotheses for what an open fixes under event timing, each
changing one thing: placements (`events`, today's default: each repetition launches on the next of up to
harness.PLACEMENTS copies of the arguments, so a measurement averages buffer addresses, as graph timing's
rotation does; `events, one placement`: every repetition on the problem's own buffers, as before) and a clean
flush (`…, clean flush`: the L2 flushed by reading a buffer instead of writing one, so the kernel's misses evict
clean lines, not the flush's dirty ones, whose write-back cost depends on where the flush buffer lies).
Per size and candidate: the median ratio of each repeat, and the
spread of those medians ((max − min) / median), beside the p10–p90 width of one repeat's per-round ratios.
If `reopen` spreads and `same open` does not, the difference between runs is fixed at open time.

Writes OUT_DIR/reopen_spread.<device>.<date>.json and .md.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.reports import new_report, write_report

from cutune.gpu import harness
from cutune.gpu.backend import Backend, TimingOptions
from cutune.gpu.cupy_backend import CupyBackend
from cutune.gpu.harness import PLACEMENTS
from cutune.project import build_job, open_kernel
from cutune.template.model import Config
from cutune.tune.select import measure_rounds
from cutune.workflow.variants import variants_of, with_combined

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = {"rms_norm": "rms_norm_kernel", "gated_activation": "act_and_mul_kernel"}
WINNERS: dict[str, list[dict[str, Any]]] = {  # selection_cost run 9's per-size picks (H200, 2026-11-28)
    "rms_norm": [
        {"ITEMS": 2, "PACKS": 1, "ROW_THREADS": 256, "ROW_VEC": 8, "SPECIALIZE_HIDDEN_SIZE": True, "VARIANT": 3},
        {"ITEMS": 2, "PACKS": 1, "ROW_THREADS": 512, "ROW_VEC": 8, "SPECIALIZE_HIDDEN_SIZE": True, "VARIANT": 3},
    ],
    "gated_activation": [
        {"BLOCK_DIV": 8, "BLOCK_THREADS": 1024, "ITEMS": 2, "SPLIT": 8, "VARIANT": 1, "VEC_BYTES": 8},
        {"BLOCK_DIV": 2, "BLOCK_THREADS": 256, "ITEMS": 2, "SPLIT": 8, "VARIANT": 1, "VEC_BYTES": 16},
    ],
}
SMALL_US = 20.0  # the sizes reported in the table
_READ_FLUSH = r"""
extern "C" __global__ void cutune_read_flush(const uint4* buf, unsigned long long n, unsigned int* sink) {
  unsigned int acc = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    uint4 v = buf[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0xdeadbeefu) *sink = acc;  // never true for a zeroed buffer: keeps the loads
}
"""


@contextlib.contextmanager
def clean_flush() -> Iterator[None]:
    """`Timer.flush` reads a zeroed buffer twice the L2's size instead of writing it."""
    import cupy

    kernel = cupy.RawKernel(_READ_FLUSH, "cutune_read_flush")
    kept = harness.Timer.flush
    sink = cupy.zeros(1, dtype=cupy.uint32)

    def flush(self: harness.Timer) -> None:
        if self._flush_buffer is None:
            self._flush_buffer = cupy.zeros(self._flush_bytes, dtype=cupy.uint8)
        n = self._flush_bytes // 16
        kernel((1024,), (256,), (self._flush_buffer, cupy.uint64(n), sink))

    harness.Timer.flush = flush  # type: ignore[method-assign]
    try:
        yield
    finally:
        harness.Timer.flush = kept  # type: ignore[method-assign]


VARIANTS: dict[str, tuple[str, int, Callable[[], contextlib.AbstractContextManager[None]]]] = {
    # name: (timing mode, event timing's placements, change around the measurements)
    "events, one placement": ("events", 1, contextlib.nullcontext),  # before harness.PLACEMENTS
    "events": ("events", PLACEMENTS, contextlib.nullcontext),
    "graph": ("graph", PLACEMENTS, contextlib.nullcontext),
    "events, one placement, clean flush": ("events", 1, clean_flush),
}


def one_repeat(backend: Backend, original: Config, candidates: list[Config], rounds: int) -> list[dict[str, Any]]:
    """Per size: the original's median and each candidate's median ratio and per-round p10–p90 width."""
    measured = measure_rounds(backend, original, candidates, rounds)
    assert measured is not None
    return [
        {
            "size": timing.size,
            "original_us": timing.median_us,
            "ratios": [c.per_size[i].ratio for c in measured.contenders],
            "round_spreads": [c.per_size[i].spread for c in measured.contenders],
        }
        for i, timing in enumerate(measured.original_timings)
    ]


def run(sample: str, variant: str, reopen: bool, repeats: int, rounds: int) -> dict[str, Any]:
    """`repeats` measurements of the sample's winners in one open or in as many."""
    timing, placements, change = VARIANTS[variant]
    ctx = open_kernel(ROOT / "samples" / f"{sample}.cu", SAMPLES[sample])
    job = build_job(with_combined(ctx, variants_of(ctx)), timing=TimingOptions(mode=timing))
    original = job.space.default()
    candidates = [Config.of({**original, **w}) for w in WINNERS[sample]]
    repeats_out: list[list[dict[str, Any]]] = []
    backend: CupyBackend | None = None
    with change():
        try:
            for _ in range(repeats):
                if backend is None or reopen:
                    if backend is not None:
                        backend.close()
                    backend = CupyBackend()
                    backend.placements = placements
                    backend.open(job)
                repeats_out.append(one_repeat(backend, original, candidates, rounds))
        finally:
            if backend is not None:
                backend.close()
    sizes = []
    for i, first in enumerate(repeats_out[0]):
        per_candidate = []
        for k in range(len(candidates)):
            medians = [r[i]["ratios"][k] for r in repeats_out]
            per_candidate.append(
                {
                    "ratios": medians,
                    "between_repeats": (max(medians) - min(medians)) / statistics.median(medians),
                    "round_spread": statistics.median(r[i]["round_spreads"][k] for r in repeats_out),
                }
            )
        originals = [r[i]["original_us"] for r in repeats_out]
        sizes.append(
            {
                "size": first["size"],
                "original_us": originals,
                "original_between_repeats": (max(originals) - min(originals)) / statistics.median(originals),
                "candidates": per_candidate,
            }
        )
    return {
        "variant": variant,
        "timing": timing,
        "reopen": reopen,
        "repeats": repeats,
        "rounds": rounds,
        "sizes": sizes,
    }


def markdown(report: dict[str, Any]) -> str:
    """Per sample: a row per (timing, open) with the largest between-repeat spread at each small size."""
    lines = [f"# Confirmed ratios between repeats, one open or one per repeat ({report['device']}, {report['date']})"]
    for sample, runs in report["samples"].items():
        small = [s for s in runs[0]["sizes"] if statistics.median(s["original_us"]) <= SMALL_US]
        head = " | ".join(", ".join(f"{k}={v}" for k, v in s["size"].items()) for s in small)
        lines += ["", f"## {sample}: ratio spread between repeats / one repeat's p10–p90, sizes ≤ {SMALL_US:g} µs"]
        lines += ["", f"| timing, opens | {head} |", "|---" * (len(small) + 1) + "|"]
        for r in runs:
            cells = []
            for s in r["sizes"]:
                if statistics.median(s["original_us"]) > SMALL_US:
                    continue
                worst = max(s["candidates"], key=lambda c: c["between_repeats"])
                cells.append(f"{worst['between_repeats']:.3f} / {worst['round_spread']:.3f}")
            label = f"{r.get('variant', r['timing'])}, {'reopen' if r['reopen'] else 'same open'}"
            lines.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Both timings, one open and one per repeat, on each sample; the report written."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", default="rms_norm")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--variants", default="events, one placement;events;graph", help=f"`;`-separated, of: {'; '.join(VARIANTS)}"
    )
    ap.add_argument("--opens", default="same,reopen", help="one open for all repeats (same), one each (reopen)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report = new_report()
    for sample in args.only.split(","):
        runs = []
        for variant in args.variants.split(";"):
            for reopen in (o == "reopen" for o in args.opens.split(",")):
                runs.append(run(sample, variant, reopen, args.repeats, args.rounds))
                worst = [max(c["between_repeats"] for c in s["candidates"]) for s in runs[-1]["sizes"]]
                spreads = " ".join(f"{w:.3f}" for w in worst)
                label = "reopen" if reopen else "same open"
                print(f"{sample} [{variant}, {label}]: between repeats per size {spreads}", flush=True)
        report["samples"][sample] = runs
    write_report(args.out, "reopen_spread", report, markdown(report))


if __name__ == "__main__":
    main()
