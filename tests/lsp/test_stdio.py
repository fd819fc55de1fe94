"""stdin read and stdout written by the server's event loop: whole messages from bytes in any pieces, a file as
stdin, an end of stdin in the middle of a message, a large answer written without waiting for the editor."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cutune.lsp.stdio import PipeWriter, readable_as_pipe, stdout_writer

INITIALIZE = {"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}}
SHUTDOWN = {"id": 2, "method": "shutdown"}
EXIT = {"method": "exit"}


def _framed(message: dict[str, Any]) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


async def _answer(stdout: asyncio.StreamReader) -> dict[str, Any]:
    length = 0
    while (line := await stdout.readline()) != b"\r\n":
        assert line, "the server closed its stdout"
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    answer: dict[str, Any] = json.loads(await stdout.readexactly(length))
    return answer


async def _serve(chunks: list[bytes]) -> tuple[list[dict[str, Any]], int, str]:
    """Send `chunks` to a `cutune serve` over a pipe, one write each, waiting a little between them; its answers
    to requests, its exit code and its stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cutune", "serve", stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    for chunk in chunks:
        proc.stdin.write(chunk)
        await proc.stdin.drain()
        await asyncio.sleep(0.002)
    proc.stdin.close()
    answers = []
    try:
        while True:
            answers.append(await _answer(proc.stdout))
    except (AssertionError, asyncio.IncompleteReadError):
        pass
    code = await asyncio.wait_for(proc.wait(), 10)
    return answers, code, (await proc.stderr.read()).decode()


def test_a_pipe_is_read_by_the_event_loop_and_a_file_is_not(tmp_path: Path) -> None:
    read, write = os.pipe()
    try:
        assert readable_as_pipe(read)
    finally:
        os.close(read)
        os.close(write)
    with (tmp_path / "stdin").open("wb") as file:
        assert not readable_as_pipe(file.fileno())


@pytest.mark.timeout(60)
def test_messages_arriving_byte_by_byte_are_answered() -> None:
    stream = _framed(INITIALIZE) + _framed(SHUTDOWN)
    answers, code, stderr = asyncio.run(_serve([stream[i : i + 1] for i in range(len(stream))] + [_framed(EXIT)]))
    assert [a["id"] for a in answers] == [1, 2], stderr
    assert answers[0]["result"]["serverInfo"]["name"] == "cutune"
    assert code == 0, stderr


@pytest.mark.timeout(60)
def test_a_file_as_stdin_is_served_too(tmp_path: Path) -> None:
    stdin = tmp_path / "stdin"
    stdin.write_bytes(_framed(INITIALIZE) + _framed(SHUTDOWN) + _framed(EXIT))
    with stdin.open("rb") as file:
        done = subprocess.run(
            [sys.executable, "-m", "cutune", "serve"], stdin=file, capture_output=True, timeout=30, check=False
        )
    assert done.stdout.count(b"Content-Length:") == 2, done.stderr.decode()
    assert done.returncode == 0, done.stderr.decode()


@pytest.mark.timeout(60)
def test_stdin_ending_inside_a_message_ends_the_server_with_one_line() -> None:
    cut = _framed(SHUTDOWN)[:-5]
    answers, _, stderr = asyncio.run(_serve([_framed(INITIALIZE), cut]))
    assert [a["id"] for a in answers] == [1]
    assert "Traceback" not in stderr, stderr
    assert "stdin closed in the middle of a message" in stderr


@pytest.mark.timeout(10)
def test_a_large_answer_is_queued_while_the_editor_is_not_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    read, write = os.pipe()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(os.fdopen(write, "wb")))

    async def write_unread() -> None:
        writer = await stdout_writer()
        assert isinstance(writer, PipeWriter)
        writer.write(b"x" * (8 << 20))  # more than any pipe holds, and nobody reads: a blocking write would hang
        writer.close()

    try:
        asyncio.run(write_unread())
    finally:
        os.close(read)


def test_stdout_shared_with_stderr_is_written_as_pygls_does(monkeypatch: pytest.MonkeyPatch) -> None:
    read, write = os.pipe()
    shared = io.TextIOWrapper(os.fdopen(write, "wb"))
    monkeypatch.setattr(sys, "stdout", shared)
    monkeypatch.setattr(sys, "stderr", shared)  # stderr writes would fail on a full pipe that does not block
    try:
        assert not isinstance(asyncio.run(stdout_writer()), PipeWriter)
    finally:
        shared.close()
        os.close(read)
