"""A real OpenAI-compatible HTTP server on 127.0.0.1 for the LLM planner tests.

It answers POST /v1/chat/completions with queued replies (in order; the last one repeats), records
every request (headers and JSON body), and can answer late, with an HTTP error, or with garbage.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One canned answer: a status, a body (a dict is sent as JSON), its content type and a delay."""

    body: dict[str, Any] | str
    status: int = 200
    content_type: str = "application/json"
    delay: float = 0.0


@dataclass(frozen=True)
class Request:
    """What the planner sent."""

    path: str
    headers: dict[str, str]  # lower-case names
    body: dict[str, Any]


def completion(content: str | None, *, model: str = "tuner-7b") -> Reply:
    """A realistic chat completion whose message is `content`."""
    return Reply(
        {
            "id": "chatcmpl-8x2f",
            "object": "chat.completion",
            "created": 1763769600,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "logprobs": None,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                }
            ],
            "usage": {"prompt_tokens": 2310, "completion_tokens": 64, "total_tokens": 2374},
        }
    )


def plan_answer(
    recipes: list[str],
    params: dict[str, list[Any]] | None = None,
    *,
    reason: str = "",
    done: bool = False,
    fenced: bool = True,
) -> Reply:
    """A completion answering with a plan, in a ```json fence after a line of prose (as models often do)."""
    plan = json.dumps({"recipes": recipes, "params": params or {}, "reason": reason, "done": done}, indent=2)
    return completion(f"Here is the next plan.\n```json\n{plan}\n```\n" if fenced else plan)


class FakeLLM:
    """The server; `url` is the base URL to give the OpenAI client."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Request] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                owner.requests.append(Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                reply = owner.next_reply() if self.path == "/v1/chat/completions" else Reply("not found", 404)
                time.sleep(reply.delay)
                data = (json.dumps(reply.body) if isinstance(reply.body, dict) else reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", reply.content_type)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (a timeout test)
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False  # a late reply must not hold up the test's teardown
        # a short poll: shutdown() waits up to one interval, at every test's teardown
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def next_reply(self) -> Reply:
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
