"""Synthetic replay recordings, made at test time: TEST-ONLY timings from a formula, never measured on a GPU."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

from cutune.gpu.backend import DeviceInfo, Measurement, Timing
from cutune.gpu.replay import header_for
from cutune.project import build_job, open_kernel
from cutune.template.model import Config

DEVICE = DeviceInfo(
    name="Synthetic GPU (test-only)",
    arch="sm_90",
    sm_count=132,
    l2_bytes=60 << 20,
    copy_bandwidth_gbs=4000.0,
    empty_launch_us=3.0,
)
# how results replayed from the fixtures' recording are labelled (the date is the recording's)
REPLAYED = r"replayed from scale\.recording\.jsonl \(Synthetic GPU \(test-only\), \d{4}-\d\d-\d\d\)"
NOTE = "TEST-ONLY synthetic timings from a formula in tests/lsp/synthetic.py; not measured on any GPU"


def synthetic_us(config: Config, n: int) -> float:
    """A made-up time: best at 256 threads per block and 2 items per thread."""
    threads = int(config.get("BLOCK_THREADS", 256))
    items = int(config.get("ITEMS_PER_THREAD", 2))
    penalty = 1 + 0.25 * abs(math.log2(threads / 256)) + (0.1 if items != 2 else 0.0)
    return (5.0 + n / 2e5) * penalty


def write_recording(source: Path, kernel: str, path: Path) -> Path:
    """A recording of every configuration of the kernel's space, its header labelled as synthetic."""
    ctx = open_kernel(source, kernel)
    job = build_job(ctx)
    lines = [{**header_for(job, DEVICE), "note": NOTE}]
    names = [p.name for p in job.space.params]
    for values in itertools.product(*(p.values for p in job.space.params)):
        config = Config.of(dict(zip(names, values, strict=True)))
        timings = tuple(_timing(size, synthetic_us(config, size["n"])) for size in job.spec.sizes)
        lines.append({"type": "measurement", **Measurement(config, timings=timings).to_dict()})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _timing(size: dict[str, int], median: float) -> Timing:
    return Timing(size=dict(size), median_us=median, p10_us=median * 0.995, p90_us=median * 1.005, reps=100)
