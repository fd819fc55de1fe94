"""The flashinfer corpus through cutune: kernels found / extracted / compiled (nvcc) / templatized, and every
refusal class with its count. Needs flashinfer-python installed without its dependencies
(`pip install --no-deps flashinfer-python==0.6.0`, as scripts/test.sh does) and nvcc on PATH; no GPU.

    .venv/bin/python benchmarks/corpus_report.py [--arch sm_90]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the corpus runner lives with its tests

from tests.corpus.corpus import FILES, include_root, run_corpus


def main() -> int:
    """Print the corpus report; exit 1 when flashinfer-python is not installed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90")
    args = parser.parse_args()
    root = include_root()
    if root is None:
        print("flashinfer-python is not installed: pip install --no-deps flashinfer-python==0.6.0", file=sys.stderr)
        return 1
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cutune-corpus-") as cache:
        report = run_corpus(root, Path(cache), arch=args.arch)
    seconds = time.perf_counter() - start
    declared = sum(len(names) for names in report.declared.values())
    print(f"flashinfer corpus ({root}), {len(FILES)} files, nvcc -arch={args.arch}, {seconds:.0f} s cold")
    print(f"  __global__ definitions: {declared}; kernels found: {report.found()}")
    for what in ("extracted", "compiled", "templatized"):
        print(f"  {what}: {report.count(what)} / {report.found()}")
    print("per kernel:")
    for k in report.kernels:
        status = "compiled" if k.compiled else "EXTRACT FAILED" if not k.extracted else "COMPILE FAILED"
        params = ", ".join(r for r in k.applied if r != "compile_flags") or "-"
        regs = f"{k.registers} regs" if k.registers is not None else ""
        print(f"  {k.file}:{k.kernel} <- {k.instantiation}: {status} {regs}; recipes: {params}")
        if k.instantiation_note:
            print(f"      ({k.instantiation_note})")
    print("compile failures:")
    for line, n in report.compile_failures().most_common():
        print(f"  {n:3d}  {line}")
    print("refusal classes:")
    for line, n in report.refusal_classes().most_common():
        print(f"  {n:3d}  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
