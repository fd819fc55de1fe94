"""Commands with malformed arguments get an error answer and one line on the server's stderr, no traceback."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

MALFORMED = ([42], [{"uri": 5}], None, [{"kernel": "k"}])


async def _exchange(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """Send JSON-RPC messages to a `cutune serve` over stdio; its answers (to requests) and its stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cutune",
        "serve",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    for message in messages:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    answers: list[dict[str, Any]] = []
    wanted = {m["id"] for m in messages if "id" in m}
    while wanted - {a.get("id") for a in answers}:
        length = 0
        while (line := await proc.stdout.readline()) != b"\r\n":
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        answer = json.loads(await proc.stdout.readexactly(length))
        if "method" not in answer:
            answers.append(answer)
    proc.stdin.write(b'Content-Length: 33\r\n\r\n{"jsonrpc":"2.0","method":"exit"}')
    stderr = (await proc.stderr.read()).decode()
    await proc.wait()
    return answers, stderr


@pytest.mark.timeout(60)
def test_malformed_command_arguments_leave_no_traceback() -> None:
    messages: list[dict[str, Any]] = [
        {"id": 0, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}},
        {"method": "initialized", "params": {}},
    ]
    for i, arguments in enumerate(MALFORMED, 1):
        params = {"command": "cutune.templatize", **({} if arguments is None else {"arguments": arguments})}
        messages.append({"id": i, "method": "workspace/executeCommand", "params": params})
    messages.append({"id": 99, "method": "shutdown"})
    answers, stderr = asyncio.run(_exchange(messages))
    by_id = {a["id"]: a for a in answers}
    assert all(("error" in by_id[i]) or by_id[i]["result"] == {"applied": False, "params": []} for i in range(1, 5))
    assert "Traceback" not in stderr, stderr
