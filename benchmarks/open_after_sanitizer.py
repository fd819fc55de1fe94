"""Why a job's second open can be slow after compute-sanitizer ran (kv_cache_write's held-out open: 16-22 s
after the sanitizer, 3 s without it): open, sanitize a few configurations, close, and time opening the
held-out sizes, in this process (profiled) and in an isolated worker, against the same without the sanitizer.

    python -m benchmarks.open_after_sanitizer [--sample kv_cache_write] [--configs 4]
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import io
import pstats
import random
import subprocess
import time
from pathlib import Path

from benchmarks.selection_cost import SAMPLES

from cutune.gpu.registry import create_backend
from cutune.limits import limits_for
from cutune.project import build_job, open_kernel
from cutune.spec.model import KernelSpec
from cutune.template.model import Config, Space
from cutune.tune.dispatch import held_out_sizes
from cutune.tune.space import Feasibility
from cutune.workflow.variants import variants_of, with_combined

ROOT = Path(__file__).resolve().parents[1]


def held_spec(spec: KernelSpec) -> KernelSpec:
    """The spec of the held-out open: every held-out size, no ragged tails."""
    sizes = tuple(spec.with_bounds(s) for _, s in held_out_sizes(spec.keyed_sizes(), spec.multiple_of))
    return dataclasses.replace(spec, sizes=sizes, weights=(), ragged=False)


def feasible_sample(space: Space, spec: KernelSpec, count: int) -> list[Config]:
    """`count` distinct feasible configurations of the space, drawn with a fixed seed."""
    check, rng, found = Feasibility(space, spec, limits_for("sm_90")), random.Random(0), dict[Config, None]()
    while len(found) < count:
        config = Config.of({p.name: rng.choice(p.values) for p in space.params})
        if check.violation(config) is None:
            found[config] = None
    return list(found)


def gpu_apps() -> str:
    """The processes on the GPU now."""
    query = ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"]
    return subprocess.run(query, capture_output=True, text=True, check=False).stdout.strip() or "none"


def main() -> None:
    """Time the held-out open with and without a sanitizer run before it, in process and isolated."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", default="kv_cache_write")
    parser.add_argument("--configs", type=int, default=4)
    args = parser.parse_args()
    ctx = open_kernel(ROOT / "samples" / f"{args.sample}.cu", SAMPLES[args.sample])
    job = build_job(with_combined(ctx, variants_of(ctx)))
    held = dataclasses.replace(job, spec=held_spec(job.spec))
    configs = feasible_sample(job.space, job.spec, args.configs)
    from cupy._core import _accelerator  # diagnostics only: which reductions CuPy hands to CUB

    reductions, routines = _accelerator.get_reduction_accelerators(), _accelerator.get_routine_accelerators()
    print(f"CuPy's accelerators: reductions {reductions}, routines {routines}", flush=True)
    for isolate in (False, True):
        for sanitize in (False, True):
            backend = create_backend("cupy", isolate=isolate)
            began = time.perf_counter()
            backend.open(job)
            opened = time.perf_counter() - began
            began = time.perf_counter()
            for config in configs:
                backend.evaluate(config)
            evaluated = (time.perf_counter() - began) / len(configs)
            checked = ""
            if sanitize:
                began = time.perf_counter()
                checks = backend.sanitize(configs) or ()
                checked = f"sanitizer {time.perf_counter() - began:.1f} s ({sum(c.ok for c in checks)} passed); "
                checked += f"on the GPU after it: {gpu_apps()}; "
            backend.close()
            profile = cProfile.Profile()
            began = time.perf_counter()
            profile.enable()
            backend.open(held)
            profile.disable()
            second = time.perf_counter() - began
            backend.close()
            where = "isolated" if isolate else "in process"
            head = f"{where}, sanitizer {'on' if sanitize else 'off'}: first open {opened:.1f} s"
            print(f"{head}; {evaluated:.2f} s an evaluation; {checked}held-out open {second:.1f} s", flush=True)
            if not isolate:
                out = io.StringIO()
                pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(18)
                print(out.getvalue(), flush=True)


if __name__ == "__main__":
    main()
