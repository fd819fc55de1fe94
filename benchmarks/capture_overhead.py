"""What capture costs on the CPU (no GPU needed): the recorder's Python work per launch (struct reading, the
argument bytes, counting; the driver answered by a stand-in, so CUPTI's and the driver's own time are not in it),
and the time from a capture log to written specs (matching, demangling, drafting, fitting, writing).

Usage: python benchmarks/capture_overhead.py [OUT_DIR]  (default benchmarks/results); writes
capture_overhead.<cpu>.<date>.json.
"""

from __future__ import annotations

import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.capture import test_intercept as recorder_test  # noqa: E402
from tests.capture.test_spec import PATHS, _paths_log  # noqa: E402

from cutune.capture.log import read_log  # noqa: E402
from cutune.capture.run import specs_from_log  # noqa: E402


def per_launch_us(launches: int = 20000) -> float:
    """Median µs of the recorder's callback over repeated launches of one problem (five runs)."""
    m = recorder_test.m
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(5):
            mem = recorder_test.Memory()
            rec = m.Recorder(str(Path(folder) / "p.jsonl"), ["scale_kernel"], None, 1, recorder_test.StandInDriver())
            address = recorder_test._driver_launch(mem)
            start = time.perf_counter()
            for _ in range(launches):
                rec.on_callback(307, address, False)
            runs.append((time.perf_counter() - start) / launches * 1e6)
            assert next(iter(rec.entries.values()))["count"] == launches
    return statistics.median(runs)


def log_to_specs_s() -> float:
    """Seconds from the launch_paths capture log (3 kernels × 3 sizes) to their written specs."""
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        shutil.copy(PATHS, work)
        log = read_log(_paths_log(work, lambda n: min(-(-n // 256), 65535)))
        start = time.perf_counter()
        outcome = specs_from_log(log, work)
        elapsed = time.perf_counter() - start
        assert len(outcome.kernels) == 3 and not outcome.errors
    return elapsed


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "benchmarks" / "results"
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "")
    record = {
        "device": cpu or platform.processor(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "python": platform.python_version(),
        "recorder_us_per_launch": per_launch_us(),
        "log_to_specs_s": log_to_specs_s(),
    }
    path = out / f"capture_overhead.{record['device'].replace(' ', '-')}.{record['date']}.json"
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
