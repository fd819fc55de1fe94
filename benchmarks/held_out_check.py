"""Which configurations of a held-out corpus kernel's variants the checks reject, and why (GPU): each variant at its
defaults, with and without FAST_MATH, evaluated once against the original."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.corpus_variants import HELD_OUT, opened

from cutune.gpu.backend import TimingOptions
from cutune.gpu.registry import create_backend
from cutune.project import build_job
from cutune.template.model import Config
from cutune.template.variants import VARIANT, combine_all


def main() -> None:
    """Print one verdict line per configuration."""
    for entry in HELD_OUT:
        ctx = opened(entry)
        combined = combine_all(ctx.template_model, entry.kernel, ctx.template, ctx.spec)
        ctx = dataclasses.replace(ctx, template=combined.template, template_model=combined.model, spec=combined.spec)
        backend = create_backend("cupy")
        backend.open(build_job(ctx, timing=TimingOptions(warmup=1, reps=3, min_time_ms=0.0)))
        default = ctx.space.default()
        try:
            for k in range(len(combined.variants) + 1):
                for fast in (False, True):
                    values = {**default, VARIANT: k}
                    if "FAST_MATH" in values:
                        values["FAST_MATH"] = fast
                    measured = backend.evaluate(Config.of(values))
                    print(entry.kernel, values, measured.ok, measured.failure, str(measured.detail)[:300], flush=True)
        finally:
            backend.close()


if __name__ == "__main__":
    main()
