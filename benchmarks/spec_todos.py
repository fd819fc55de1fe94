"""What the drafted spec leaves TODO on production kernels no one here wrote (issue #22's measure): over every
launched kernel of the three corpora (flashinfer, DeepSpeed, llama.cpp), the kernels whose draft has a TODO in
the grid, the block, the shared memory, the template arguments or an argument's dtype/value, and those with none
(checkable and tunable without editing the spec: sizes are drafted with placeholder values, not TODOs). CPU only.

    .venv/bin/python benchmarks/spec_todos.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the corpus locations live with the tests

from tests.corpus.agreement import launched_kernels
from tests.corpus.sources import corpora

from cutune.errors import CutuneError
from cutune.project import open_kernel
from cutune.spec import KernelSpec
from cutune.spec.load import TODO

FIELDS = ("grid", "block", "shared_mem", "template_args", "args")


def todo_fields(spec: KernelSpec) -> list[str]:
    """The fields of a drafted spec that hold a TODO."""
    found = {
        "grid": any(d.startswith(TODO) for d in spec.grid),
        "block": any(d.startswith(TODO) for d in spec.block),
        "shared_mem": spec.shared_mem.startswith(TODO),
        "template_args": any(v.startswith(TODO) for v in spec.template_args.values()),
        "args": any(TODO in (a.value or "") or TODO in a.dtype for a in spec.args),
    }
    return [f for f in FIELDS if found[f]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for corpus in corpora().values():
        for path, kernel in launched_kernels(corpus):
            row: dict[str, Any] = {"corpus": corpus.name, "file": str(path.relative_to(corpus.root)), "kernel": kernel}
            try:
                row["todo"] = todo_fields(open_kernel(path, kernel).drafted_spec())
            except CutuneError as e:
                row["error"] = str(e).splitlines()[0][:200]
            rows.append(row)
    drafted = [r for r in rows if "todo" in r]
    counts = {f: sum(f in r["todo"] for r in drafted) for f in FIELDS}
    clean = sum(not r["todo"] for r in drafted)
    record = {
        "benchmark": "spec_todos",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"cpu": platform.processor() or platform.machine(), "python": platform.python_version()},
        "seconds": round(time.perf_counter() - start, 1),
        "kernels": len(rows),
        "drafted": len(drafted),
        "no_todo": clean,
        "todo_by_field": counts,
        "by_corpus": {
            name: {
                "kernels": sum(r["corpus"] == name for r in rows),
                "no_todo": sum(r["corpus"] == name and not r.get("todo", ["error"]) for r in rows),
            }
            for name in dict.fromkeys(r["corpus"] for r in rows)
        },
        "rows": rows,
    }
    print(
        f"{len(rows)} launched kernels, {len(drafted)} drafted; "
        f"no TODO: {clean} ({100 * clean / max(len(rows), 1):.1f}%); "
        + ", ".join(f"{f} TODO {n}" for f, n in counts.items())
        + f"; {record['seconds']} s"
    )
    for name, c in record["by_corpus"].items():
        print(f"  {name}: {c['no_todo']}/{c['kernels']} with no TODO")
    if args.out:
        args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
