"""How soon a large `.cu` gets its code lenses: didOpen → codeLens response, on a real `cutune serve`.

    python benchmarks/lsp_parse.py [--lines 5000] [--reps 30] [--out benchmarks/results/lsp_parse.json]

The file is the samples' kernels repeated (renamed) up to `--lines` lines. Each repetition opens a new
file (so nothing is cached) and times the lens request sent right after didOpen, then the lens request
right after a one-line change, and when the diagnostics of the full analysis arrive. The in-process
times of the scan and of tree-sitter's source model are measured too. Target: lenses in under 30 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from cutune.cuda.parse import parse_source
from cutune.lsp.scan import scan_kernels

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ("merge_attn_states.cu", "silu_and_mul.cu")
LANGUAGE = "cuda-cpp"


def large_source(lines: int, tag: str = "") -> str:
    """The samples, repeated with their kernels renamed (with `tag` in each name), up to about `lines` lines."""
    texts = [(ROOT / "samples" / name).read_text(encoding="utf-8") for name in SAMPLES]
    parts: list[str] = []
    copy = 0
    while sum(p.count("\n") for p in parts) < lines:
        text = texts[copy % len(texts)]
        parts.append(re.sub(r"\b(\w+_kernel|silu_and_mul|merge_attn_states)\b", rf"\1{tag}_{copy}", text))
        copy += 1
    return "".join(parts)


def machine() -> dict[str, Any]:
    """Where the numbers were taken."""
    cpu = platform.processor()
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def summary(samples_ms: list[float]) -> dict[str, float]:
    """Median, p95, p99 and max of a list of milliseconds."""
    ordered = sorted(samples_ms)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {
        "n": len(ordered),
        "median_ms": statistics.median(ordered),
        "p95_ms": pct(0.95),
        "p99_ms": pct(0.99),
        "max_ms": ordered[-1],
    }


async def start_server(settings: Any = None) -> tuple[LanguageClient, asyncio.Queue[types.PublishDiagnosticsParams]]:
    """A `cutune serve` subprocess, initialized; diagnostics it publishes go to the queue."""
    client = LanguageClient("cutune-benchmark", "1")
    published: asyncio.Queue[types.PublishDiagnosticsParams] = asyncio.Queue()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        published.put_nowait(params)

    await client.start_io(sys.executable, "-m", "cutune", "serve")
    capabilities = types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True))
    await client.initialize_async(types.InitializeParams(capabilities=capabilities, initialization_options=settings))
    client.initialized(types.InitializedParams())
    return client, published


async def stop_server(client: LanguageClient) -> None:
    """Shut the server down cleanly."""
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()


def open_document(client: LanguageClient, uri: str, text: str) -> None:
    """didOpen, version 1."""
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=LANGUAGE, version=1, text=text)
        )
    )


async def lenses_ms(client: LanguageClient, uri: str) -> tuple[float, int]:
    """The time of one codeLens request, and how many lenses came back."""
    start = time.perf_counter()
    found = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    return (time.perf_counter() - start) * 1e3, len(found or [])


async def measure(lines: int, reps: int) -> dict[str, Any]:
    """Open, change and analyse `reps` fresh copies of a `lines`-line file."""
    text = large_source(lines)
    kernels = len(parse_source(text).kernels)
    after_open, after_change, analysed = [], [], []
    client, published = await start_server()
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(reps):
            # a text of its own (every kernel renamed): the server's caches of parsed texts cannot help
            text = large_source(lines, f"_r{rep}")
            path = Path(tmp) / f"large_{rep}.cu"
            path.write_text(text, encoding="utf-8")
            uri = path.as_uri()
            start = time.perf_counter()
            open_document(client, uri, text)
            _, count = await lenses_ms(client, uri)
            after_open.append((time.perf_counter() - start) * 1e3)
            assert count >= kernels, f"{count} lenses for {kernels} kernels"
            while (await published.get()).uri != uri:
                pass
            analysed.append((time.perf_counter() - start) * 1e3)
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(text=text + "// edited\n")],
                )
            )
            after_change.append((await lenses_ms(client, uri))[0])
            client.text_document_did_close(
                types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
            )
    await stop_server(client)
    return {
        "lines": text.count("\n"),
        "kernels": kernels,
        "reps": reps,
        "lenses_after_did_open": summary(after_open),
        "lenses_after_did_change": summary(after_change),
        "diagnostics_after_did_open": summary(analysed),
        "in_process_scan": summary(_timed(scan_kernels, [large_source(lines, f"_s{rep}") for rep in range(reps)])),
        "in_process_parse_source": summary(
            _timed(parse_source, [large_source(lines, f"_p{rep}") for rep in range(reps)])
        ),
    }


def _timed(fn: Any, texts: list[str]) -> list[float]:
    """Milliseconds of `fn(text)` for each text (each one new: no cache of parsed texts helps)."""
    times = []
    for text in texts:
        start = time.perf_counter()
        fn(text)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def main() -> None:
    """Run, print and write the results."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "lsp_parse.json")
    args = parser.parse_args()
    results = {
        "benchmark": "lsp_parse",
        "target": "lenses within 30 ms of didOpen",
        "machine": machine(),
        **asyncio.run(measure(args.lines, args.reps)),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
