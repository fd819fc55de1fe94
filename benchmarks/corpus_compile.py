"""`check` against the compile path of `tune`, kernel by kernel, over every launched kernel of the production
corpora (flashinfer, DeepSpeed, llama.cpp; see tests/corpus/sources.py): kernels, originals that compile (by
compiler), agreements, and each remaining compile-failure class with its count. CPU only (nvcc, NVRTC).

    .venv/bin/python benchmarks/corpus_compile.py OUT_DIR [--workers 2] [--cache DIR]

Writes OUT_DIR/corpus_compile.<cpu>.<date>.json (every kernel) and .md (the counts).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import platform
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the corpus runner lives with its tests

from tests.corpus.agreement import summary, sweep
from tests.corpus.sources import corpora

from cutune.gpu.compile_cache import CompileCache


def cpu_name() -> str:
    """The CPU model's first word pair, for file names (e.g. AMD-EPYC)."""
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else platform.processor()
    model = next((line.split(":", 1)[1] for line in text.splitlines() if line.startswith("model name")), "cpu")
    return "-".join(re.findall(r"[A-Za-z0-9]+", model)[:2]) or "cpu"


def main() -> int:
    """Run the sweep and write its record; exit 1 when a kernel's check and tune disagree."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=Path(".cutune/corpus-cache"))
    args = parser.parse_args()
    found = corpora()
    if not found:
        print("no corpus: run scripts/corpus.sh and install flashinfer-python --no-deps", file=sys.stderr)
        return 1
    start = time.perf_counter()
    results = sweep(list(found.values()), CompileCache(args.cache), workers=args.workers)
    seconds = time.perf_counter() - start
    counts = summary(results)
    date = datetime.date.today().isoformat()
    stem = args.out / f"corpus_compile.{cpu_name()}.{date}"
    args.out.mkdir(parents=True, exist_ok=True)
    record = {
        "device": platform.processor() or cpu_name(),
        "cpu": cpu_name(),
        "date": date,
        "seconds": round(seconds, 1),
        "workers": args.workers,
        "corpora": {name: str(c.root) for name, c in found.items()},
        **counts,
        "kernels_detail": [dataclasses.asdict(r) | {"agree": r.agree} for r in results],
    }
    Path(f"{stem}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    lines = [
        f"# check vs tune's compile path over the production corpora ({cpu_name()}, {date})",
        "",
        f"{counts['kernels']} launched kernels ({counts['by_corpus']}), {seconds:.0f} s with {args.workers} workers.",
        f"Originals that compile: {counts['originals_compile']} (by compiler: {counts['by_compiler']}).",
        f"check and tune's compile path agree on {counts['agree']} of {counts['kernels']}.",
        "",
        "| count | remaining failure class (check's first error) |",
        "|---:|---|",
        *(f"| {n} | {c.replace('|', '/')} |" for c, n in counts["failure_classes"].items()),  # type: ignore[attr-defined]
    ]
    Path(f"{stem}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0 if not counts["disagree"] else 1


if __name__ == "__main__":
    sys.exit(main())
