"""Wall time of one exhaustive search on 1 GPU and on several, through the real pipeline, and whether the
winner is the same.

    python benchmarks/multi_gpu.py OUT_DIR [--devices 0,1]

The kernel is benchmarks/kernels/scale_add.cu with its space widened in this script's own copy of the
spec (block size × items per thread × fast math × register cap: 288 configurations, every one its own
NVRTC build and measurement). Each run uses a fresh study and a budget that covers the whole space, so
both measure the same configurations. Writes OUT_DIR/multi_gpu.<device>.<date>.json with the search's
wall time (from the study: the first trial to the last, startup and final selection excluded), the
command's whole wall time, the speedup of each, and the winners; when they differ, both are re-measured in
the same interleaved rounds on one GPU, to say whether they can be told apart beyond the noise at all.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna

from cutune.gpu.registry import create_backend
from cutune.project import build_job, open_kernel, tune_options
from cutune.template.model import Config
from cutune.tune.parallel import BackendRef, parse_devices, tune_on_devices
from cutune.tune.result import TuneResult
from cutune.tune.run import tune
from cutune.tune.select import combined_noise, measure_rounds, original_noise, tie_margin
from cutune.tune.study import load_study

ROOT = Path(__file__).resolve().parents[1]
KERNEL = "scale_add"
ROUNDS = 9  # interleaved rounds of the two winners and the original, for the comparison
WIDER = """
[kernel.scale_add.params.FAST_MATH]
values = [false, true]
default = false
binding = "flag"
flag = "--use_fast_math"

[kernel.scale_add.params.MAXRREGCOUNT]
values = [0, 24, 32, 48, 64, 128]
default = 0
binding = "flag"
flag = "-maxrregcount={}"
"""


def main() -> None:
    """Tune the widened space on one GPU, then on all of `--devices`; write the comparison."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--devices", default="0,1")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    import cupy  # type: ignore[import-untyped]

    devices = parse_devices(args.devices, cupy.cuda.runtime.getDeviceCount)
    one, several = _run(devices[:1]), _run(devices)
    name = one["device"]
    date = datetime.date.today().isoformat()
    report = {
        "device": name,
        "date": date,
        "kernel": KERNEL,
        "configurations": one["trials"],
        "devices": list(devices),
        "one_gpu": one,
        "several_gpus": several,
        "search_speedup": one["search_s"] / several["search_s"],
        "wall_speedup": one["wall_s"] / several["wall_s"],
        "same_winner": one["best"] == several["best"],
        "winners_compared": _compare(devices[0], one["best"], several["best"]),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"multi_gpu.{re.sub(r'[^A-Za-z0-9]+', '-', name).strip('-')}.{date}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(f"wrote {path}")


def _workspace(work: Path) -> Path:
    """The kernel and its widened spec in `work`, a workspace root of its own (studies and results stay there)."""
    shutil.copy(ROOT / "benchmarks" / "kernels" / f"{KERNEL}.cu", work)
    spec = (ROOT / "benchmarks" / "kernels" / f"{KERNEL}.tune.toml").read_text()
    (work / f"{KERNEL}.tune.toml").write_text(spec + WIDER)
    (work / "pyproject.toml").write_text("")
    return work


def _run(devices: tuple[int, ...]) -> dict[str, Any]:
    """One exhaustive search of the widened space on `devices`, in a fresh workspace and study."""
    with tempfile.TemporaryDirectory() as tmp:
        work = _workspace(Path(tmp))
        ctx = open_kernel(work / f"{KERNEL}.cu", KERNEL)
        job = build_job(ctx)
        options = tune_options(ctx, trials=ctx.space.size(), seconds=None)
        started = time.monotonic()
        if len(devices) == 1:
            result = tune(job, create_backend("cupy", device=devices[0]), options)
        else:
            result = tune_on_devices(job, BackendRef("cupy"), devices, options)
        wall = time.monotonic() - started
        study = load_study(options.storage(), result.study)
        return {
            "devices": list(devices),
            "device": result.device,
            "trials": result.trials,
            "stop": result.stop,
            "search_s": _search_seconds(study),
            "wall_s": wall,
            "best": dict(result.best),
            "speedup_of_best": _speedup(result),
            "per_worker": _per_worker(study),
        }


def _compare(device: int, first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Both winners re-measured in the same interleaved rounds on one GPU: are they told apart beyond the noise?"""
    with tempfile.TemporaryDirectory() as tmp:
        work = _workspace(Path(tmp))
        ctx = open_kernel(work / f"{KERNEL}.cu", KERNEL)
        backend = create_backend("cupy", device=device)
        backend.open(build_job(ctx))
        try:
            a, b = Config.of(first), Config.of(second)
            rounds = measure_rounds(backend, ctx.space.default(), list(dict.fromkeys([a, b])), ROUNDS)
        finally:
            backend.close()
    assert rounds is not None
    ratio = {c.config: c.overall.ratio for c in rounds.contenders}
    margin = tie_margin(combined_noise(original_noise(rounds), [1.0] * len(rounds.original_timings)), ROUNDS)
    apart = abs(math.log(ratio[a]) - math.log(ratio[b]))
    return {
        "device_index": device,
        "rounds": ROUNDS,
        "time_vs_original": [ratio[a], ratio[b]],
        "log_difference": apart,
        "tie_margin": margin,
        "within_noise": apart <= margin,
    }


def _search_seconds(study: optuna.Study) -> float:
    """From the first trial's start to the last trial's end: the search itself, over all workers."""
    trials = [t for t in study.get_trials(deepcopy=False) if t.datetime_start and t.datetime_complete]
    start = min(t.datetime_start for t in trials if t.datetime_start)
    end = max(t.datetime_complete for t in trials if t.datetime_complete)
    return (end - start).total_seconds()


def _per_worker(study: optuna.Study) -> dict[str, int]:
    """How many trials each worker finished."""
    counts: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        worker = str(t.user_attrs.get("worker", "?"))
        counts[worker] = counts.get(worker, 0) + 1
    return counts


def _speedup(result: TuneResult) -> float | None:
    """The confirmed overall speedup of the best configuration over the original (geometric mean)."""
    ratios = [s.original.median_us / s.tuned.median_us for s in result.sizes if s.tuned.median_us > 0]
    if not ratios:
        return None
    product = 1.0
    for r in ratios:
        product *= r
    return product ** (1 / len(ratios))


if __name__ == "__main__":
    main()
