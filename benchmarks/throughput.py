"""Sweep the samples' spaces on the GPU, recorded for replay, and report configurations per second.

    python benchmarks/throughput.py OUT_DIR [--passes 2] [--limit 100] [--space recipes|spec]

For every sample it writes OUT_DIR/<stem>.<space>.<device>.jsonl, a replay recording of `passes`
rounds over the default and up to `limit - 1` other configurations drawn at random (for the CPU tests
of the search and of noise-aware selection), and prints the open time (CUDA start, speed of light,
reference) and evaluations per second through the isolated worker with prefetching, as a search
runs. `--space recipes` measures the templatized source over the recipes' space; `--space spec` the
file as written over its spec's parameters.
"""

from __future__ import annotations

import argparse
import itertools
import random
import re
import time
from pathlib import Path

from cutune.cuda.parse import parse_source
from cutune.errors import CutuneError
from cutune.gpu.backend import Job, TimingOptions
from cutune.gpu.registry import create_backend
from cutune.spec import load_spec, spec_path_for
from cutune.template.model import Config, Space, Template
from cutune.template.templatize import templatize

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = [("silu_and_mul.cu", "silu_and_mul_kernel"), ("merge_attn_states.cu", "merge_attn_states_kernel")]
PREFETCH = 4


def some_configs(space: Space, limit: int) -> list[Config]:
    """The default, then up to `limit - 1` others of the whole grid (constraints are left to the backend)."""
    names = [p.name for p in space.params]
    grid = [Config.of(dict(zip(names, v, strict=True))) for v in itertools.product(*(p.values for p in space.params))]
    default = space.default()
    others = [c for c in grid if c != default]
    return [default, *random.Random(0).sample(others, min(limit - 1, len(others)))]


def sample_job(file: str, kernel: str, space_from: str) -> Job:
    """A sample's job: templatized with the recipes' space, or as written with the spec's parameters.

    The spec only needs to match the kernel's parameters by position here: the backend passes
    arguments in order, so a spec written for the original also drives its templatized version.
    """
    path = ROOT / "samples" / file
    text = path.read_text(encoding="utf-8")
    spec = load_spec(spec_path_for(path)).kernel(kernel)
    if space_from == "recipes":
        template = templatize(parse_source(text, str(path)), kernel)
        space = template.space
    else:
        space = spec.space or Space(())
        template = Template(kernel=kernel, source=text, space=space)
    return Job(source_path=str(path), template=template, spec=spec, space=space, timing=TimingOptions())


def sweep(file: str, kernel: str, out_dir: Path, passes: int, limit: int, space_from: str) -> None:
    """Record `passes` rounds over some of one sample's configurations and print throughput."""
    job = sample_job(file, kernel, space_from)
    configs = some_configs(job.space, limit) * passes
    tmp = out_dir / f"{Path(file).stem}.{space_from}.partial.jsonl"  # renamed once complete
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
    tmp.rename(out_dir / f"{Path(file).stem}.{space_from}.{device}.jsonl")
    print(
        f"{file}: {info.name}, opened in {opened:.1f} s; {len(configs)} evaluations "
        f"({failures} failed) in {elapsed:.1f} s = {len(configs) / elapsed:.2f} configurations/s "
        f"with {len(job.spec.sizes)} sizes each"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--space", choices=("recipes", "spec"), default="recipes")
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    failed = False
    for file, kernel in SAMPLES:
        try:
            sweep(file, kernel, args.out_dir, args.passes, args.limit, args.space)
        except CutuneError as e:  # one sample failing to open still leaves the other's recording
            print(f"{file}: {e}")
            failed = True
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
