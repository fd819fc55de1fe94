"""Record what `cutune templatize` prints and writes for each kernel of the samples, a few corpus files and the
big_file benchmark's file, so a change meant to be invisible (a faster templatize) can be checked: record before
and after, then `diff -r` the two folders.

    python -m benchmarks.templatize_outputs OUT_DIR [--lines 50000]

Each kernel gets a fresh `cutune` process per command, as a user runs it: `templatize FILE -k KERNEL` where the file
is (with its spec, when it has one), then `templatize --write` on a copy of the file alone in an empty workspace
(what it prints, the rewritten file and the drafted spec).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.big_file import big_source

ROOT = Path(__file__).resolve().parents[1]
CORPUS = [
    ".corpus/llama_cpp_python-0.3.16/vendor/llama.cpp/ggml/src/ggml-cuda/norm.cu",
    ".corpus/llama_cpp_python-0.3.16/vendor/llama.cpp/ggml/src/ggml-cuda/unary.cu",
    ".corpus/deepspeed-0.18.2/csrc/transformer/inference/csrc/*.cu",
]
# the big file's first kernel (the sample), one in the middle and its last
BIG_KERNELS = ("silu_and_mul_kernel", "scale_2000_kernel", "scale_{last}_kernel")


def sources() -> list[Path]:
    """The samples and the corpus files that are present (the corpus is a local link, not in the repository)."""
    found = sorted((ROOT / "samples").rglob("*.cu"))
    for pattern in CORPUS:
        found += sorted(ROOT.glob(pattern))
    return found


def kernel_names(path: Path) -> list[str]:
    """The distinct kernel names of a file, in source order."""
    from cutune.cuda import parse_source

    model = parse_source(path.read_text(encoding="utf-8", errors="replace"), str(path))
    return list(dict.fromkeys(k.name for k in model.kernels))


def cutune(args: list[str], cwd: Path) -> str:
    """What one `cutune` command prints (stdout, then stderr and the exit code when it fails)."""
    done = subprocess.run([sys.executable, "-m", "cutune", *args], cwd=cwd, capture_output=True, text=True, check=False)
    return done.stdout + (f"\n--- stderr, exit {done.returncode}\n{done.stderr}" if done.returncode else "")


def record(path: Path, kernel: str, out: Path) -> None:
    """The outputs of both commands for one kernel, as files under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "templatize.txt").write_text(cutune(["templatize", path.name, "-k", kernel], path.parent))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "pyproject.toml").write_text("")
        shutil.copy(path, work / path.name)
        (out / "write.txt").write_text(cutune(["templatize", path.name, "-k", kernel, "--write"], work))
        for written in sorted(work.iterdir()):
            if written.is_file() and written.name != "pyproject.toml":
                shutil.copy(written, out / f"written.{written.name}")


def main() -> None:
    """Record every kernel's outputs under the given folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--lines", type=int, default=50_000)
    args = parser.parse_args()
    for path in sources():
        for kernel in kernel_names(path):
            print(f"{path.relative_to(ROOT)}: {kernel}", flush=True)
            record(path, kernel, args.out / path.relative_to(ROOT).as_posix().replace("/", "__") / kernel)
    with tempfile.TemporaryDirectory() as tmp:
        text, count = big_source(args.lines)
        big = Path(tmp) / "big.cu"
        big.write_text(text, encoding="utf-8")
        (Path(tmp) / "pyproject.toml").write_text("")
        for kernel in BIG_KERNELS:
            name = kernel.format(last=count - 2)
            print(f"big.cu: {name}", flush=True)
            record(big, name, args.out / "big.cu" / name)


if __name__ == "__main__":
    main()
