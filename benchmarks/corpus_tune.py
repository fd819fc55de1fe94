"""Production kernels in `tune`: on corpus kernels of different files whose original `check` compiles, the
tune backend (isolated CuPy worker, compiler auto) opens the job (reference run at the drafted sizes and the
ragged ones) and times the original once. Per kernel: the compiler that compiled it, the measured time, or the
failure with its reason. GPU; about 3 minutes on an H100.

    python3 benchmarks/corpus_tune.py OUT_DIR [--kernels 24] [--seconds 170]

Specs are drafted by cutune; where the draft leaves a TODO the corpus runner fills it (template arguments,
grid 1 / block 128, no shared memory), and kernels whose draft knows its grid and block come first. Torch
headers reached through project headers are stood in for (CUDA's half/bf16 types) unless --with-torch.
Writes OUT_DIR/corpus_tune.<device>.<date>.json and .md.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the corpus runner lives with its tests

from tests.corpus.agreement import Agreement, agreement, filled_spec, launched_kernels
from tests.corpus.sources import Corpus, corpora

from cutune.cuda.torch_types import TORCH_ENV
from cutune.errors import CutuneError
from cutune.gpu.backend import TimingOptions
from cutune.gpu.compile import run_parallel
from cutune.gpu.compile_cache import CompileCache
from cutune.gpu.sol import cache_dir
from cutune.gpu.worker import IsolatedBackend
from cutune.project import build_job, open_kernel
from cutune.spec.load import TODO

QUICK = TimingOptions(warmup=2, reps=10, min_time_ms=1.0, max_reps=100, trial_timeout_s=20.0)


def candidates(found: dict[str, Corpus]) -> list[tuple[Corpus, Path, str]]:
    """One launched kernel per file, corpora interleaved; kernels whose drafted grid and block are known first."""
    per_corpus = []
    for corpus in found.values():
        first: dict[Path, str] = {}
        for path, kernel in launched_kernels(corpus):
            first.setdefault(path, kernel)
        per_corpus.append([(corpus, p, k) for p, k in first.items()])
    mixed = [c for group in zip(*per_corpus, strict=False) for c in group]
    mixed += [c for group in per_corpus for c in group if c not in mixed]
    return sorted(mixed, key=lambda c: not _launch_known(*c))  # stable: the interleaving stays


def _launch_known(corpus: Corpus, path: Path, kernel: str) -> bool:
    try:
        spec = open_kernel(path, kernel).drafted_spec()
    except CutuneError:
        return False
    return not any(d.startswith(TODO) for d in (*spec.grid, *spec.block))


def measure(corpus: Corpus, path: Path, kernel: str, checked: Agreement) -> dict[str, Any]:
    """Open the kernel's job in the isolated CuPy worker and time its original once."""
    row: dict[str, Any] = {
        "corpus": corpus.name,
        "file": checked.file,
        "kernel": kernel,
        "filled": list(checked.filled),
        "check_compiler": checked.check.compiler,
    }
    ctx = open_kernel(path, kernel)
    spec, _ = filled_spec(ctx, corpus)
    job = dataclasses.replace(build_job(dataclasses.replace(ctx, spec=spec, spec_error=None)), timing=QUICK)
    start = time.perf_counter()
    worker = IsolatedBackend("cupy", options={"compiler": "auto"}, start_timeout_s=30.0)
    try:
        info = worker.open(job)
        row["device"] = info.name
        row["notes"] = list(info.notes)
        m = worker.evaluate(job.space.default())
        row["compiler"] = m.compile.compiler if m.compile else None
        row["fallback"] = m.compile.fallback if m.compile else ""
        if m.ok:
            row["median_us"] = [round(t.median_us, 3) for t in m.timings]
            row["sizes"] = [t.size for t in m.timings]
        else:
            row["failure"] = f"{m.failure.value if m.failure else 'no timing'}: {m.detail[:300]}"
    except CutuneError as e:
        row["failure"] = f"open: {str(e)[:300]}"
    finally:
        worker.close()
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def main() -> int:
    """Pick, check and measure; write the record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--kernels", type=int, default=24)
    parser.add_argument("--seconds", type=float, default=170.0, help="start no kernel after this many seconds")
    parser.add_argument(
        "--with-torch", action="store_true", help="use PyTorch's headers where a project header reaches torch"
    )
    args = parser.parse_args()
    if not args.with_torch:  # ATen's headers cost nvcc tens of seconds per unit: CUDA's types stand in (workers too)
        os.environ[TORCH_ENV] = ""
    start = time.perf_counter()
    found = corpora()
    if not found:
        print("no corpus: carry .corpus (scripts/corpus.sh) or install flashinfer-python --no-deps", file=sys.stderr)
        return 1
    print(f"corpora: {', '.join(found)}", flush=True)
    picked = candidates(found)[: args.kernels * 2]  # twice the wanted: some originals do not compile
    cache = CompileCache(cache_dir() / "compile")  # the worker's own: it finds the originals compiled
    args.out.mkdir(parents=True, exist_ok=True)
    checks = run_parallel([lambda c=c: agreement(c[0], c[1], c[2], cache) for c in picked], workers=16)
    compiling = [(c, a) for c, a in zip(picked, checks, strict=True) if isinstance(a, Agreement) and a.check.compiled]
    print(f"{len(compiling)} of {len(picked)} candidate originals compile ({time.perf_counter() - start:.0f} s)")
    rows = []
    for (corpus, path, kernel), checked in compiling[: args.kernels]:
        if time.perf_counter() - start > args.seconds:
            rows.append({"corpus": corpus.name, "file": checked.file, "kernel": kernel, "failure": "not reached"})
            continue
        rows.append(measure(corpus, path, kernel, checked))
        print(json.dumps(rows[-1])[:400], flush=True)
    device = next((str(r["device"]) for r in rows if "device" in r), "no-device").replace(" ", "-")
    date = datetime.date.today().isoformat()
    stem = args.out / f"corpus_tune.{device}.{date}"
    measured = [r for r in rows if "median_us" in r]
    record = {
        "device": device,
        "date": date,
        "seconds": round(time.perf_counter() - start, 1),
        "candidates": len(picked),
        "originals_compile": len(compiling),
        "opened_and_measured": len(measured),
        "kernels": rows,
    }
    Path(f"{stem}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    lines = [
        f"# Corpus originals in tune ({device}, {date})",
        "",
        f"{len(rows)} kernels of different files whose original `check` compiles; {len(measured)} measured.",
        "",
        "| corpus | file | kernel | compiler | median µs | failure |",
        "|---|---|---|---|---:|---|",
        *(
            f"| {r['corpus']} | {r['file']} | {r['kernel']} | {r.get('compiler') or '-'} | "
            f"{', '.join(map(str, r.get('median_us', []))) or '-'} | {r.get('failure', '').replace('|', '/')[:160]} |"
            for r in rows
        ),
    ]
    Path(f"{stem}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
