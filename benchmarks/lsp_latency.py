"""Request latency of `cutune serve`: while an autotune job runs, and while large files are analysed.

    python -m benchmarks.lsp_latency [--trials 1536] [--sizes 5000,20000,50000,200000] [--edit comment|kernel]
                                     [--no-job] [--no-shown] [--out FILE]

Large files (`--sizes`, benchmarks/big_file.py's: a sample then one small kernel and launch per 11 lines):
each is opened in a fresh server, then edited a few times (an incremental didChange inserting a line in the
middle: a comment, or with `--edit kernel` a statement in the body of the kernel there; right after opening, the
client says it shows the 60 lines around that place, as the extension does, unless `--no-shown`); after each edit,
codeLens and codeAction (on the first kernel) requests are sent back to back until the edit's diagnostics
arrive, so every latency is measured while an analysis runs (lenses that come without their command are
resolved one at a time, as an editor resolves those it shows: the first of each list). Then `exit` is sent
right after one more edit, and the time until the process ends is measured. Every other edit is analysed with
no request meanwhile: its diagnostics time is the server's alone. Targets: p99 lens and action <= 50 ms,
diagnostics after an edit <= 300 ms at 20,000 lines and <= 1.5 s at 200,000, exit within 1 s.

The job replays a synthetic recording (TEST-ONLY timings from tests/lsp/synthetic.py, made at run time)
over a 1,536-point space, so the server's tuning thread does what it does on a GPU machine minus the GPU:
Optuna's ask/tell, the study's journal writes, selection. Requests are sent back to back, alternating
codeLens and hover, first with no job (baseline), then until the job ends. Target: p99 < 50 ms.
Run it from the repository root (it imports the tests' recording helper).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from asyncio.subprocess import PIPE
from pathlib import Path
from typing import Any

from benchmarks.big_file import big_source
from benchmarks.lsp_parse import LANGUAGE, ROOT, lenses_ms, machine, open_document, start_server, stop_server, summary
from lsprotocol import types
from tests.lsp.synthetic import write_recording

from cutune.lsp.lenses import VISIBLE_RANGES

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


EDITS = 5  # edits per size with requests during their analysis, and as many without


class RawClient:
    """A minimal JSON-RPC client of `cutune serve` over stdio. Answers are only `json.loads`-ed, as an editor's
    `JSON.parse` does: the times are the server's and the pipe's, not a Python client's conversion of 40,000
    lenses into objects (which took longer than the server). They are decoded with the client's cycle collector
    off (answers are acyclic): its collections during the decoding of 60,000 lenses tripled the client's time
    (290-370 ms of CPU instead of 85 at 200,000 lines, 2026-11-25). Each request's time until its last byte
    arrived, before any decoding, is kept too (`received`)."""

    def __init__(self) -> None:
        self.diagnostics: asyncio.Queue[tuple[str, float]] = asyncio.Queue()  # uri, arrival time
        self._answers: dict[int, asyncio.Future[Any]] = {}
        self._received: dict[int, float] = {}  # request id → when its answer's last byte arrived
        self.received_ms: list[float] = []  # each timed request's time until then
        self._ids = 0

    async def start(self) -> None:
        """Start the server and initialize it."""
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cutune", "serve", stdin=PIPE, stdout=PIPE, limit=1 << 26
        )
        self._reading = asyncio.ensure_future(self._read())
        await self.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        self.notify("initialized", {})

    def notify(self, method: str, params: Any) -> None:
        """Send a notification."""
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: Any) -> Any:
        """Send a request and wait for its result."""
        self._ids += 1
        answer = self._answers[self._ids] = asyncio.get_running_loop().create_future()
        self._send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        message = await answer
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error']}")
        return message.get("result")

    def _send(self, message: Any) -> None:
        body = json.dumps(message).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            length = 0
            while (line := await stdout.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line:
                return
            body = await stdout.readexactly(length)
            arrived = time.perf_counter()
            gc.disable()
            try:
                message = json.loads(body)
            finally:
                gc.enable()
            if "id" in message and "method" not in message:
                self._received[message["id"]] = arrived
            if "id" in message and "method" not in message:
                self._answers.pop(message["id"]).set_result(message)
            elif message.get("method") == "textDocument/publishDiagnostics":
                self.diagnostics.put_nowait((message["params"]["uri"], time.perf_counter()))
            elif "id" in message:  # a request of the server's (none expected with no capabilities)
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": None})

    async def next_diagnostics(self, uri: str) -> float:
        """When the next diagnostics of `uri` arrive."""
        while True:
            published, at = await self.diagnostics.get()
            if published == uri:
                return at

    async def timed(self, method: str, params: Any) -> tuple[float, Any]:
        """One request's milliseconds until its answer is decoded, and its result (the milliseconds until its last
        byte arrived go to `received_ms`)."""
        ident, start = self._ids + 1, time.perf_counter()  # the id `request` gives it
        result = await self.request(method, params)
        decoded = time.perf_counter()
        self.received_ms.append((self._received.pop(ident, decoded) - start) * 1e3)
        return (decoded - start) * 1e3, result


EDITED = {  # what an edit inserts: a comment line, or a statement in a kernel's body
    "comment": "// edit {version}\n",
    "kernel": "  const int edit_{version} = {version};\n",
}


def _edit(client: RawClient, uri: str, version: int, line: int, kind: str) -> None:
    """An incremental didChange: one line inserted before `line`."""
    at = {"line": line, "character": 0}
    client.notify(
        "textDocument/didChange",
        {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": at, "end": at}, "text": EDITED[kind].format(version=version)}],
        },
    )


SHOWN = 60  # the lines an editor shows, around the edit (`--shown`)


async def large_file(lines: int, kind: str = "comment", shown: bool = True) -> dict[str, Any]:
    """Open, edit (`kind`: an EDITED line in the middle of the file, or in the body of the kernel there) and exit
    on one `lines`-line file in a fresh server; with `shown`, the client says which lines it shows (SHOWN lines
    around the edit, right after opening, as the extension does: `cutune/visibleRanges`)."""
    text, kernels = big_source(lines)
    split = text.splitlines()
    middle = (
        lines // 2
        if kind == "comment"
        else next(i for i in range(lines // 2, len(split)) if "__global__" in split[i]) + 2
    )
    kernel_line = next(i for i, t in enumerate(text.splitlines()) if "__global__" in t) + 2  # inside the kernel
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pyproject.toml").write_text("")
        path = root / "big.cu"
        path.write_text(text, encoding="utf-8")
        uri = path.as_uri()
        client = RawClient()
        await client.start()
        document = {"textDocument": {"uri": uri}}
        at = {"line": kernel_line, "character": 0}
        action = {**document, "range": {"start": at, "end": at}, "context": {"diagnostics": []}}
        start = time.perf_counter()
        item = {"uri": uri, "languageId": LANGUAGE, "version": 1, "text": text}
        client.notify("textDocument/didOpen", {"textDocument": item})
        if shown:
            top = max(0, middle - SHOWN // 2)
            view = {"start": {"line": top, "character": 0}, "end": {"line": top + SHOWN, "character": 0}}
            client.notify(VISIBLE_RANGES, {"textDocument": {"uri": uri}, "ranges": [view]})
        first_lens_ms, found = await client.timed("textDocument/codeLens", document)
        found_count = len(found or [])
        del found  # kept, its objects made every collection of the client's slower: 60,000 lenses at 200k lines
        opened_s = await client.next_diagnostics(uri) - start
        lens, lens_received, resolves, resolves_received, actions, quiet, busy, offered = [], [], [], [], [], [], [], 0
        for version in range(2, 2 + 2 * EDITS):
            _edit(client, uri, version, middle, kind)
            edited = time.perf_counter()
            arrived = asyncio.ensure_future(client.next_diagnostics(uri))
            while version % 2 and not arrived.done():  # every other edit: requests back to back meanwhile
                ms, listed = await client.timed("textDocument/codeLens", document)
                lens.append(ms)
                lens_received.append(client.received_ms[-1])
                if listed and "command" not in listed[0]:  # resolved when shown: one, as an editor asks
                    resolves.append((await client.timed("codeLens/resolve", listed[0]))[0])
                    resolves_received.append(client.received_ms[-1])
                ms, answer = await client.timed("textDocument/codeAction", action)
                actions.append(ms)
                offered = max(offered, len(answer or []))
                await asyncio.sleep(0.005)
            (busy if version % 2 else quiet).append((await arrived - edited) * 1e3)
        _edit(client, uri, 2 + 2 * EDITS, middle, kind)
        await asyncio.sleep(0.3)  # the analysis of that edit has begun
        exit_start = time.perf_counter()
        await client.request("shutdown", None)
        client.notify("exit", None)
        await client.process.wait()
        exit_s = time.perf_counter() - exit_start
    return {
        "lines": text.count("\n"),
        "kernels": kernels,
        "shown_lines": SHOWN if shown else None,
        "first_lens_after_open_ms": first_lens_ms,
        "lenses_after_open": found_count,
        "open_to_diagnostics_s": opened_s,
        "diagnostics_after_edit": summary(quiet),  # no request meanwhile
        "diagnostics_after_edit_amid_requests": summary(busy),
        "code_lens_during_analysis": summary(lens),
        "code_lens_received_during_analysis": summary(lens_received),  # until the last byte, before decoding
        **({"code_lens_resolve_during_analysis": summary(resolves)} if resolves else {}),
        **({"code_lens_resolve_received_during_analysis": summary(resolves_received)} if resolves else {}),
        "code_action_during_analysis": summary(actions),
        "code_actions_offered": offered,
        "shutdown_and_exit_s": exit_s,
    }


def main() -> None:
    """Run, print and write the results."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1536)
    parser.add_argument("--sizes", default="5000,20000,50000,200000", help="line counts of the large files")
    parser.add_argument("--no-job", action="store_true", help="only the large files")
    parser.add_argument(
        "--edit", choices=sorted(EDITED), default="comment", help="what each edit of a large file inserts"
    )
    parser.add_argument(
        "--no-shown", action="store_true", help="the client does not say which lines it shows (another editor)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "lsp_latency.json")
    args = parser.parse_args()
    results: dict[str, Any] = {
        "benchmark": "lsp_latency",
        "target": "p99 < 50 ms for codeLens and hover during autotune; on large files p99 codeLens and codeAction "
        "<= 50 ms during analysis, diagnostics after an edit <= 300 ms at 20k lines and <= 1.5 s at 200k, exit <= 1 s",
        "machine": {**machine(), "load_average_1min": os.getloadavg()[0]},  # other work inflates the times
    }
    if not args.no_job:
        results["backend"] = "replay (synthetic TEST-ONLY recording)"
        results.update(asyncio.run(measure(args.trials)))
    results["large_files"] = {}
    results["edit"] = {"kind": args.edit, "inserts": EDITED[args.edit].strip()}
    for lines in (int(n) for n in args.sizes.split(",") if n):
        results["large_files"][str(lines)] = asyncio.run(large_file(lines, args.edit, not args.no_shown))
        print(json.dumps(results["large_files"][str(lines)]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
