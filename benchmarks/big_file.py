"""The command line on a 50,000-line file: `kernels` and `templatize` must each take at most 2 s.

    python -m benchmarks.big_file [--lines 50000] [--out benchmarks/results/big_file.<cpu>.<date>.json]

The file is the silu_and_mul sample followed by small generated kernels, each with a hard-coded block
size and its own launch site, until it has `--lines` lines (about 4,500 kernels at 50,000 lines). Each
command runs in a fresh `cutune` process, as a user runs it, so the times include start-up.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "silu_and_mul.cu"
TARGET_S = 2.0

FILLER = """
template <typename T>
__global__ void scale_{i}_kernel(T* __restrict__ out, const T* __restrict__ in, int n) {{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * static_cast<T>({i});
}}

void launch_scale_{i}(float* out, const float* in, int n) {{
  scale_{i}_kernel<float><<<(n + 255) / 256, 256>>>(out, in, n);
}}
"""


def big_source(lines: int) -> tuple[str, int]:
    """The sample followed by generated kernels up to `lines` lines; and how many kernels it holds."""
    parts = [SAMPLE.read_text(encoding="utf-8")]
    count, i = parts[0].count("\n"), 0
    while count < lines:
        parts.append(FILLER.format(i=i))
        count += FILLER.count("\n")
        i += 1
    return "".join(parts), i + 1


def timed(args: list[str], cwd: Path) -> tuple[float, float, int]:
    """Wall seconds one `cutune` command takes in a fresh process, its CPU seconds (user + system: less
    sensitive to other work on a shared machine), and its exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "cutune", *args], cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return seconds, cpu, done.returncode


def machine() -> dict[str, object]:
    """The CPU, cores, Python and date the numbers were taken on."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_1min": round(os.getloadavg()[0], 2),  # other work on the machine inflates wall times
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def main() -> None:
    """Write the file, time each command a few times, print and store the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "pyproject.toml").write_text("")  # the workspace root: .cutune/ goes here
        text, kernels = big_source(args.lines)
        (work / "big.cu").write_text(text, encoding="utf-8")
        commands = {
            "kernels": ["kernels", "big.cu"],
            "templatize": ["templatize", "big.cu", "-k", "silu_and_mul_kernel"],
            "unknown kernel": ["templatize", "big.cu", "-k", "silu_and_mul"],
        }
        results: dict[str, dict[str, object]] = {}
        for name, command in commands.items():
            runs = [timed(command, work) for _ in range(args.reps)]
            seconds, cpu = [r[0] for r in runs], [r[1] for r in runs]
            results[name] = {
                "command": "cutune " + " ".join(command),
                "median_s": round(statistics.median(seconds), 3),
                "max_s": round(max(seconds), 3),
                "median_cpu_s": round(statistics.median(cpu), 3),
                "exit_code": runs[0][2],
            }
            print(
                f"{name:>15}: median {statistics.median(seconds):.2f} s wall, {statistics.median(cpu):.2f} s CPU "
                f"(max {max(seconds):.2f} s wall)",
                flush=True,
            )
    record = {
        "benchmark": "big_file",
        "target": f"kernels and templatize each <= {TARGET_S:g} s on a {args.lines:,}-line file",
        "lines": text.count("\n"),
        "kernels": kernels,
        "reps": args.reps,
        "machine": machine(),
        "results": results,
    }
    if args.out is not None:
        args.out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
