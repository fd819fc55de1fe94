"""Sweep each sample's whole space on the GPU, recorded for replay, and report configurations per second.

    python benchmarks/throughput.py OUT_DIR [--passes 3]

For every sample it writes OUT_DIR/<stem>.<device>.jsonl (a replay recording: `passes` interleaved
measurements of every configuration, for the CPU tests of the search and of noise-aware selection)
and prints the open time (CUDA start, speed of light, reference) and evaluations per second through
the isolated worker with prefetching, the way a search runs.
"""

from __future__ import annotations

import argparse
import itertools
import re
import time
from pathlib import Path

from cutune.gpu.backend import TimingOptions
from cutune.gpu.registry import create_backend
from cutune.project import build_job, open_kernel
from cutune.template.model import Config, Space

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = [("silu_and_mul.cu", "silu_and_mul_kernel"), ("merge_attn_states.cu", "merge_attn_states_kernel")]
PREFETCH = 4


def every_config(space: Space) -> list[Config]:
    """The whole grid of the space (constraints are left to the backend to reject)."""
    names = [p.name for p in space.params]
    return [
        Config.of(dict(zip(names, values, strict=True)))
        for values in itertools.product(*(p.values for p in space.params))
    ]


def sweep(file: str, kernel: str, out_dir: Path, passes: int) -> None:
    """Record `passes` sweeps of one sample's space and print throughput."""
    job = build_job(open_kernel(ROOT / "samples" / file, kernel), timing=TimingOptions())
    configs = every_config(job.space) * passes
    tmp = out_dir / f"{Path(file).stem}.jsonl"
    backend = create_backend("cupy", record=tmp)
    start = time.perf_counter()
    info = backend.open(job)
    opened = time.perf_counter() - start
    start = time.perf_counter()
    failures = 0
    for i, config in enumerate(configs):
        backend.prefetch(configs[i + 1 : i + 1 + PREFETCH])
        m = backend.evaluate(config)
        failures += not m.ok
        times = " ".join(f"{t.median_us:8.2f}" for t in m.timings)
        print(f"{file} {config}: {m.failure.value if m.failure else 'ok':10} {times} {m.detail[:120]}")
    elapsed = time.perf_counter() - start
    backend.close()
    device = re.sub(r"[^A-Za-z0-9]+", "-", info.name).strip("-")
    tmp.rename(out_dir / f"{Path(file).stem}.{device}.jsonl")
    print(
        f"{file}: {info.name}, opened in {opened:.1f} s; {len(configs)} evaluations "
        f"({failures} failed) in {elapsed:.1f} s = {len(configs) / elapsed:.2f} configurations/s "
        f"with {len(job.spec.sizes)} sizes each"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for file, kernel in SAMPLES:
        sweep(file, kernel, args.out_dir, args.passes)


if __name__ == "__main__":
    main()
