"""Which configurations of a corpus kernel's variants the checks reject, and why (GPU): every variant at its
defaults, with and without FAST_MATH, evaluated once against the original; the held-out kernels, or those named.

    python benchmarks/held_out_check.py [--only KERNEL,...]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.corpus_variants import HELD_OUT, TABLE, opened
from tests.template.variants.compile import measured_failures

from cutune.gpu.backend import TimingOptions
from cutune.project import build_job
from cutune.template.variants import VARIANT, combine_all


def main() -> None:
    """Print how many configurations passed and each one rejected, kernel by kernel."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="comma-separated kernel names of the table or the held-out list")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else None
    for entry in [e for e in (*TABLE, *HELD_OUT) if e.kernel in names] if names else HELD_OUT:
        ctx = opened(entry)
        combined = combine_all(ctx.template_model, entry.kernel, ctx.template, ctx.spec)
        ctx = dataclasses.replace(ctx, template=combined.template, template_model=combined.model, spec=combined.spec)
        job = build_job(ctx, timing=TimingOptions(warmup=1, reps=3, min_time_ms=0.0))
        passed, failed = measured_failures(job, ctx.require_spec(), {VARIANT, "FAST_MATH"})
        print(f"{entry.kernel}: {passed} passed, {len(failed)} rejected", *failed, sep="\n  ", flush=True)


if __name__ == "__main__":
    main()
