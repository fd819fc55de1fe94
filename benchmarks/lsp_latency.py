"""Request latency of `cutune serve` (code lens, hover) while an autotune job runs in its background thread.

    python -m benchmarks.lsp_latency [--trials 1536] [--out benchmarks/results/lsp_latency.json]

The job replays a synthetic recording (TEST-ONLY timings from tests/lsp/synthetic.py, made at run time)
over a 1,536-point space, so the server's tuning thread does what it does on a GPU machine minus the GPU:
Optuna's ask/tell, the study's journal writes, selection. Requests are sent back to back, alternating
codeLens and hover, first with no job (baseline), then until the job ends. Target: p99 < 50 ms.
Run it from the repository root (it imports the tests' recording helper).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.lsp_parse import ROOT, lenses_ms, machine, open_document, start_server, stop_server, summary
from lsprotocol import types
from tests.lsp.synthetic import write_recording

FIXTURE = ROOT / "tests" / "data" / "lsp" / "autotune"
KERNEL = "scale_kernel"
SPACE = """
[kernel.scale_kernel.params.BLOCK_THREADS]
values = [32, 64, 128, 256, 512, 1024]
default = 128
binding = "launch"

[kernel.scale_kernel.params.ITEMS_PER_THREAD]
values = [1, 2, 4, 8]
default = 1
binding = "template"

[kernel.scale_kernel.params.FAST_MATH]
values = [false, true]
default = false
binding = "flag"
flag = "--use_fast_math"

[kernel.scale_kernel.params.MAXRREGCOUNT]
values = [REGISTERS]
default = 0
binding = "flag"
flag = "-maxrregcount={}"
"""


def workspace(root: Path) -> Path:
    """The tests' autotune workspace with a 1,536-point space and its synthetic recording."""
    shutil.copytree(FIXTURE, root, dirs_exist_ok=True)
    (root / ".cutune").mkdir(exist_ok=True)
    spec = root / "scale.tune.toml"
    base = spec.read_text(encoding="utf-8").split("[kernel.scale_kernel.params.")[0]
    registers = ", ".join(map(str, range(0, 256, 8)))
    spec.write_text(base + SPACE.replace("REGISTERS", registers), encoding="utf-8")
    write_recording(root / "scale.cu", KERNEL, root / "scale.recording.jsonl")
    return root


async def requests_ms(client: Any, uri: str, until: asyncio.Event | None, count: int) -> list[float]:
    """Alternate codeLens and hover (on a tunable parameter) until `until` is set, or `count` of them."""
    hover = types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=5, character=25)
    )
    times: list[float] = []
    assert await client.text_document_hover_async(hover) is not None, "no hover on BLOCK_THREADS"
    while (until is None and len(times) < count) or (until is not None and not until.is_set()):
        if len(times) % 2:
            start = time.perf_counter()
            await client.text_document_hover_async(hover)
            times.append((time.perf_counter() - start) * 1e3)
        else:
            times.append((await lenses_ms(client, uri))[0])
        await asyncio.sleep(0.005)
    return times


async def measure(trials: int) -> dict[str, Any]:
    """Baseline latencies, then latencies while a `trials`-trial job runs."""
    with tempfile.TemporaryDirectory() as tmp:
        root = workspace(Path(tmp) / "workspace")
        settings = {
            "backend": "replay",
            "replayFile": "scale.recording.jsonl",
            "budget": {"trials": trials, "seconds": 600},
        }
        client, published = await start_server(settings)
        finished = asyncio.Event()
        statuses: list[dict[str, Any]] = []

        @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def on_progress_create(params: types.WorkDoneProgressCreateParams) -> None:
            return None

        @client.feature("cutune/jobStatus")
        def on_status(params: Any) -> None:
            status = params._asdict() if hasattr(params, "_asdict") else dict(params)
            statuses.append(status)
            if status["state"] in ("done", "failed", "cancelled"):
                finished.set()

        uri = (root / "scale.cu").as_uri()
        open_document(client, uri, (root / "scale.cu").read_text(encoding="utf-8"))
        await published.get()
        baseline = await requests_ms(client, uri, None, 200)
        started = time.perf_counter()
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="cutune.autotune", arguments=[{"uri": uri, "kernel": KERNEL}])
        )
        loaded = await requests_ms(client, uri, finished, 0)
        job_seconds = time.perf_counter() - started
        await stop_server(client)
    final = statuses[-1]
    return {
        "job": {"state": final["state"], "trials": final["done"], "seconds": job_seconds, "message": final["message"]},
        "no_job": summary(baseline),
        "during_job": summary(loaded),
    }


def main() -> None:
    """Run, print and write the results."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1536)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "lsp_latency.json")
    args = parser.parse_args()
    results = {
        "benchmark": "lsp_latency",
        "target": "p99 < 50 ms for codeLens and hover during autotune",
        "backend": "replay (synthetic TEST-ONLY recording)",
        "machine": machine(),
        **asyncio.run(measure(args.trials)),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
