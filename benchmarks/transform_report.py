"""Generality count: every structural transform tried on every kernel of samples/ (and of flashinfer's CUDA
sources when `flashinfer-python` is installed); per transform, where it applied and where it refused, by
reason. No transform may crash: an unexpected exception is counted and printed as a crash.

    python benchmarks/transform_report.py [--json FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
from collections import Counter
from pathlib import Path

from cutune.cuda.parse import parse_source
from cutune.errors import CutuneError, TransformRefused
from cutune.template.variants import TRANSFORMS

ROOT = Path(__file__).resolve().parents[1]
_DETAIL = re.compile(r"line \d+|`[^`]*`|\((?:line|the|\d)[^()]*\)|\b[A-Za-z_]\w*\[[^\]]*\]")


def sources() -> list[Path]:
    """The samples' .cu files, then flashinfer's CUDA sources and headers when it is installed."""
    found = sorted((ROOT / "samples").rglob("*.cu"))
    spec = importlib.util.find_spec("flashinfer")
    for root in spec.submodule_search_locations or [] if spec else []:
        found += sorted(p for p in Path(root).rglob("*") if p.suffix in (".cu", ".cuh"))
    return found


def reason_kind(reason: str) -> str:
    """A refusal's reason with its specifics (lines, code, names) taken out, so like reasons count together."""
    first = re.sub(r"the loop at line \d+ ", "a loop ", reason.split("; ")[0])
    while (shorter := _DETAIL.sub("…", first)) != first:
        first = shorter
    return " ".join(first.split())


def main() -> None:
    """Print the table (and write it as JSON when asked)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    applied: Counter[str] = Counter()
    refused: dict[str, Counter[str]] = {name: Counter() for name in TRANSFORMS}
    crashes: list[str] = []
    kernels = 0
    files = sources()
    for path in files:
        try:
            model = parse_source(path.read_text(encoding="utf-8", errors="replace"), str(path))
        except CutuneError as e:
            crashes.append(f"{path}: parse: {e}")
            continue
        for kernel in model.kernels:
            kernels += 1
            for name, transform in TRANSFORMS.items():
                try:
                    transform.apply(model, kernel.name, None)
                    applied[name] += 1
                except TransformRefused as e:
                    refused[name][reason_kind(e.reason)] += 1
                except Exception as e:  # a crash is what this report exists to find
                    crashes.append(f"{path.name}:{kernel.name}: {name}: {type(e).__name__}: {e}")
    print(f"{kernels} kernels in {len(files)} files")
    for name in TRANSFORMS:
        total = applied[name] + sum(refused[name].values())
        print(f"\n{name}: applied {applied[name]} / {total}")
        for reason, n in refused[name].most_common():
            print(f"  refused {n:4d}: {reason}")
    print(f"\ncrashes: {len(crashes)}")
    for c in crashes:
        print(f"  {c}")
    if args.json:
        data = {
            "kernels": kernels,
            "files": len(files),
            "applied": dict(applied),
            "refused": {k: dict(v) for k, v in refused.items()},
            "crashes": crashes,
        }
        args.json.write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
