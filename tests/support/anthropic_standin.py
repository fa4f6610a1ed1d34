"""A loopback stand-in for the Anthropic Messages API (``POST /v1/messages``, plain and streamed),
so the real ``anthropic`` client (and LiteLLM's Anthropic route) parse real JSON and SSE.

Anthropic itself is outside this machine; this replaces it at the HTTP boundary, the same way
``openai_standin`` does for OpenAI. Tests queue the messages the model answers.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

Json = dict[str, Any]
_counter = itertools.count(1)


def tool_use(name: str, arguments: Json, id: str | None = None) -> Json:
    """A ``tool_use`` content block."""
    return {
        "type": "tool_use",
        "id": id or f"toolu_{next(_counter):06d}",
        "name": name,
        "input": arguments,
    }


def message(*content: str | Json, model: str = "claude-sonnet-4-5") -> Json:
    """A complete ``message`` object as the API returns it (strings become text blocks)."""
    blocks = [{"type": "text", "text": c} if isinstance(c, str) else c for c in content]
    uses_tool = any(b["type"] == "tool_use" for b in blocks)
    return {
        "id": f"msg_{next(_counter):06d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": "tool_use" if uses_tool else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 7},
    }


def _sse(event: str, data: Json) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def _events(msg: Json) -> Iterator[str]:
    head = {
        **msg,
        "content": [],
        "stop_reason": None,
        "usage": {**msg["usage"], "output_tokens": 0},
    }
    yield _sse("message_start", {"type": "message_start", "message": head})
    for i, block in enumerate(msg["content"]):
        if block["type"] == "text":
            start: Json = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in _halves(block["text"])]
        else:
            start = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in _halves(json.dumps(block["input"]))
            ]
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": i, "content_block": start},
        )
        for delta in deltas:
            yield _sse(
                "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
            )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": i})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": msg["usage"]["output_tokens"]},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


def _halves(text: str) -> list[str]:
    mid = len(text) // 2
    return [p for p in (text[:mid], text[mid:]) if p]


class AnthropicStandIn:
    """The stand-in server; ``base_url`` is what ``anthropic.Anthropic(base_url=...)`` takes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Json] = deque()
        self.requests: list[Json] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def queue(self, *messages: Json) -> None:
        """The next POSTs to /v1/messages answer these, in order."""
        with self._lock:
            self._queue.extend(messages)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/messages")
        async def messages(request: Request) -> Response:
            body = json.loads(await request.body() or b"{}")
            with self._lock:
                self.requests.append(body)
                queued = self._queue.popleft() if self._queue else None
            if not body.get("messages") or not body.get("max_tokens"):
                error = {"type": "invalid_request_error", "message": "messages: Field required"}
                return JSONResponse({"type": "error", "error": error}, status_code=400)
            msg = queued or message("ok", model=str(body.get("model") or "claude-sonnet-4-5"))
            if body.get("stream"):
                return StreamingResponse(iter(list(_events(msg))), media_type="text/event-stream")
            return JSONResponse(msg)

        return app

    def start(self) -> AnthropicStandIn:
        config = uvicorn.Config(self._app(), log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("Anthropic stand-in did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._sock.close()

    def __enter__(self) -> AnthropicStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
