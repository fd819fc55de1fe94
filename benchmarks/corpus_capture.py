"""`cutune capture` on production kernels no one here wrote (issues #22 and #20): llama.cpp's ggml-cuda and
DeepSpeed's kernels, each called through its project's own host launcher (benchmarks/corpus_drivers: a driver
file per corpus file includes it and calls the launcher; the launcher computes grid, block and arguments the way
the project does). Per kernel: the TODOs of the spec cutune drafts without a capture, the spec the capture writes
(its TODOs: the bar is none), and `cutune tune` on it with nothing edited (the original measured, the result).

GPU (nvcc, PyTorch, cupti-python); about 6 minutes on an H100 with --seconds 8.

    python3 benchmarks/corpus_capture.py OUT_DIR [--seconds 8] [--cases acc,rms_norm | --corpus deepspeed] [--label L]
        [--data]  (the capture keeps each problem's inputs: tuning reads the program's own values)

Writes OUT_DIR/corpus_capture.<device>.<date>.json and .md, and each corpus's capture log beside them. The
workspaces are copies of the corpus trees in $TMPDIR (capture writes specs beside the sources).
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the corpus locations live with the tests
sys.path.insert(0, str(Path(__file__).resolve().parent / "corpus_drivers"))

from build import build
from cases import CASES, Case
from tests.corpus.sources import corpora

from cutune.errors import CutuneError
from cutune.project import open_kernel
from cutune.spec import load_spec, spec_path_for
from cutune.spec.load import TODO

DRIVERS = Path(__file__).resolve().parent / "corpus_drivers"


def todos(spec_text: str) -> list[str]:
    """The lines of a spec table that still hold a placeholder."""
    return [line.strip() for line in spec_text.splitlines() if TODO in line and not line.lstrip().startswith("#")]


def drafted_todos(path: Path, kernel: str) -> list[str] | str:
    """What the spec cutune drafts without a capture leaves TODO (or why it cannot draft one)."""
    from cutune.spec import dump_kernel_spec

    try:
        return todos(dump_kernel_spec(open_kernel(path, kernel).drafted_spec()))
    except CutuneError as e:
        return f"cannot draft: {e}"


def cutune(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user would; a timeout is a failed run, not an exception."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "cutune", *args], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""
        return subprocess.CompletedProcess(e.cmd, 124, out, f"timed out after {timeout:.0f} s")


def workspaces(work: Path) -> dict[str, tuple[Path, Path]]:
    """Copies of the corpus trees: corpus → (the tree its build includes from, the folder holding its kernels)."""
    found = corpora()
    copies = {}
    for name, sub in (("llama.cpp", "src/ggml-cuda"), ("deepspeed", "")):
        tree = work / name / found[name].root.name
        shutil.copytree(found[name].root, tree, ignore=shutil.ignore_patterns("*.tune.toml"))
        copies[name] = (tree, tree / sub if sub else tree)
    return copies


def tune_row(case: Case, source: Path, seconds: float) -> dict[str, Any]:
    """Tune one captured kernel with its spec as the capture wrote it."""
    row: dict[str, Any] = {}
    start = time.perf_counter()
    done = cutune("tune", str(source), "-k", case.kernel, "--seconds", str(seconds), "--format", "json",
                  timeout=seconds * 4 + 120)  # fmt: skip
    row["tune_s"] = round(time.perf_counter() - start, 1)
    if done.returncode != 0:
        row["tune_error"] = (done.stderr.strip() or done.stdout.strip())[-600:]
        return row
    result = json.loads(done.stdout)
    row["speedup"] = result.get("speedup")
    row["sizes"] = [
        {
            "size": s["size"],
            "weight": s.get("weight"),
            "original_us": s["original"]["median_us"],
            "tuned_us": s["tuned"]["median_us"],
            "floor_us": s.get("sol_floor_us"),
            "best_config": s.get("best_config"),
        }
        for s in result.get("sizes", [])
    ]
    return row


def run(out: Path, seconds: float, names: list[str], data: bool) -> dict[str, Any]:
    cases = [c for c in CASES if not names or c.name in names]
    work = Path(tempfile.gettempdir()) / "cutune_corpus_capture"
    shutil.rmtree(work, ignore_errors=True)
    spaces = workspaces(work)
    rows: dict[str, dict[str, Any]] = {}
    for c in cases:
        source = spaces[c.corpus][1] / c.file
        drafted = drafted_todos(source, c.kernel)
        rows[c.name] = {"corpus": c.corpus, "file": c.file, "kernel": c.kernel, "drafted_todos": drafted}
    libraries = {c.library: (c.corpus, spaces[c.corpus][0]) for c in cases}
    start = time.perf_counter()
    failed = build(libraries, work / "lib")
    record: dict[str, Any] = {"build_s": round(time.perf_counter() - start, 1), "build_errors": failed}
    for corpus in ("llama.cpp", "deepspeed"):
        group = [c for c in cases if c.corpus == corpus and c.library not in failed]
        if not group:
            continue
        log = out / f"corpus_capture.{corpus}.launches.jsonl"
        kernels = [a for c in group for a in ("-k", c.kernel)]
        program = [sys.executable, str(DRIVERS / "program.py"), str(work / "lib"), *(c.name for c in group)]
        keep = ["--data"] if data else []
        done = cutune("capture", "--root", str(spaces[corpus][1]), "--log", str(log), *keep, *kernels, "--",
                      *program, timeout=600)  # fmt: skip
        record[f"capture_{corpus}"] = {"returncode": done.returncode, "output": (done.stdout + done.stderr)[-3000:]}
    for c in cases:
        row = rows[c.name]
        if c.library in failed:
            row["failure"] = "driver build failed"
            continue
        source = spaces[c.corpus][1] / c.file
        spec_path = spec_path_for(source)
        try:
            spec = load_spec(spec_path).kernels.get(c.kernel) if spec_path.exists() else None
        except CutuneError as e:
            row["failure"] = f"captured spec does not load: {e}"
            continue
        if spec is None:
            row["failure"] = "no spec written for it by the capture"
            continue
        table = spec_path.read_text(encoding="utf-8")
        row["captured_spec"] = table
        row["captured_todos"] = todos(table)
        row["captured_sizes"] = len(spec.sizes)
        row.update(tune_row(c, source, seconds))
    record["kernels"] = rows
    return record


def markdown(record: dict[str, Any]) -> str:
    """The table of the JSON record."""
    rows = record["kernels"]
    tuned = [r for r in rows.values() if "speedup" in r]
    no_todo = [r for r in rows.values() if "captured_todos" in r and not r["captured_todos"]]
    files = len({(r["corpus"], r["file"]) for r in rows.values()})
    lines = [
        f"# Capture on corpus kernels ({record['device']}, {record['date']})",
        "",
        f"{len(rows)} kernels of {files} files, each called through its project's own host launcher. Specs written "
        f"by `cutune capture` with no TODO: {len(no_todo)}. `cutune tune` (--seconds {record['seconds']:g}, spec as "
        f"captured) measured the original and finished: {len(tuned)}.",
        "",
        "| corpus | file | kernel | drafted TODOs | captured TODOs | sizes | tune s | speedup | failure |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows.values():
        drafted = r["drafted_todos"]
        failure = r.get("failure") or r.get("tune_error") or ""
        cells = [
            r["corpus"],
            r["file"],
            r["kernel"],
            str(len(drafted)) if isinstance(drafted, list) else "-",
            str(len(r["captured_todos"])) if "captured_todos" in r else "-",
            str(r.get("captured_sizes", "-")),
            str(r.get("tune_s", "-")),
            f"{r['speedup']:.3f}×" if r.get("speedup") is not None else "-",
            failure.strip().splitlines()[-1][:160].replace("|", "/") if failure.strip() else "",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--cases", default="")
    parser.add_argument("--corpus", choices=("llama.cpp", "deepspeed"), help="only this corpus's cases")
    parser.add_argument("--label", default="", help="appended to the result files' names")
    parser.add_argument("--data", action="store_true", help="capture with --data: tune on the program's own inputs")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    device = torch.cuda.get_device_name().replace(" ", "-")
    date = datetime.date.today().isoformat()
    record = {"device": device, "date": date, "seconds": args.seconds, "data": args.data}
    names = [n for n in args.cases.split(",") if n] or [c.name for c in CASES if args.corpus in (None, c.corpus)]
    record.update(run(args.out, args.seconds, names, args.data))
    stem = f"corpus_capture.{device}.{date}{'.' + args.label if args.label else ''}"
    (args.out / f"{stem}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    (args.out / f"{stem}.md").write_text(markdown(record), encoding="utf-8")
    print(markdown(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
