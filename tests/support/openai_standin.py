"""A loopback stand-in for the OpenAI HTTP API, so the real ``openai`` client parses real JSON.

OpenAI itself is outside this machine; this replaces it at the HTTP boundary. A FastAPI app runs
under uvicorn in a background thread on a free 127.0.0.1 port. Tests queue the answers they want
(built with the helpers below, shaped as the API sends them) and read back what was requested.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from tests.support.lazy import lazy_import

# Imported on first use (collection imports this module in every worker). Globals, as FastAPI
# resolves its handlers' annotations in the module's namespace.
fastapi = lazy_import("fastapi")
http_responses = lazy_import("fastapi.responses")
uvicorn = lazy_import("uvicorn")

Json = dict[str, Any]
ChatHandler = Callable[[Json], Json]
ResponseHandler = Callable[[Json], Json]

_counter = itertools.count(1)


def _id(prefix: str) -> str:
    """A unique, realistic-looking identifier (``call_…``, ``resp_…``, ``ws_…``)."""
    return f"{prefix}_{next(_counter):04d}{int(time.time() * 1000) % 10**8:08d}abcdef"


def _tokens(text: str | None) -> int:
    return max(1, len((text or "").split())) if text else 0


# -- Chat Completions builders -------------------------------------------------------------------


def tool_call(name: str, arguments: dict[str, Any], id: str | None = None) -> Json:
    """One entry of ``choices[0].message.tool_calls``."""
    return {
        "id": id or _id("call"),
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def chat_completion(
    content: str | None = None,
    tool_calls: list[Json] | None = None,
    model: str = "gpt-4o-mini",
    finish_reason: str | None = None,
    refusal: str | None = None,
    annotations: list[Json] | None = None,
) -> Json:
    """A complete ``chat.completion`` object as the API returns it."""
    message: Json = {"role": "assistant", "content": content, "refusal": refusal, "annotations": []}
    if annotations:
        message["annotations"] = annotations
    if tool_calls:
        message["tool_calls"] = tool_calls
    if finish_reason is None:
        finish_reason = "tool_calls" if tool_calls else "stop"
    prompt_tokens = 12
    completion_tokens = _tokens(content) + sum(
        _tokens((t.get("function") or {}).get("arguments") or (t.get("custom") or {}).get("input"))
        for t in tool_calls or []
    )
    return {
        "id": _id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_standin01",
    }


def url_annotation(url: str, title: str, start_index: int = 0, end_index: int = 0) -> Json:
    """A Chat Completions ``url_citation`` annotation (nested form)."""
    return {
        "type": "url_citation",
        "url_citation": {
            "url": url,
            "title": title,
            "start_index": start_index,
            "end_index": end_index,
        },
    }


# -- Responses builders --------------------------------------------------------------------------


def response(output: list[Json], model: str = "gpt-4.1", tools: list[Json] | None = None) -> Json:
    """A complete Responses API ``response`` object."""
    text_out = sum(
        _tokens(part.get("text"))
        for item in output
        if item.get("type") == "message"
        for part in item.get("content", [])
    )
    now = int(time.time())
    return {
        "id": _id("resp"),
        "object": "response",
        "created_at": now,
        "completed_at": now,
        "status": "completed",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "max_tool_calls": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": tools or [],
        "top_logprobs": 0,
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": {
            "input_tokens": 20,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": text_out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 20 + text_out,
        },
        "user": None,
        "metadata": {},
    }


def url_citation(url: str, title: str, start_index: int = 0, end_index: int = 0) -> Json:
    """A Responses ``url_citation`` annotation on an ``output_text`` part (flat form)."""
    return {
        "type": "url_citation",
        "url": url,
        "title": title,
        "start_index": start_index,
        "end_index": end_index,
    }


def output_message(text: str, annotations: list[Json] | None = None) -> Json:
    return {
        "id": _id("msg"),
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [
            {"type": "output_text", "text": text, "annotations": annotations or [], "logprobs": []}
        ],
    }


def refusal_message(refusal: str) -> Json:
    return {
        "id": _id("msg"),
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "refusal", "refusal": refusal}],
    }


def function_call(name: str, arguments: dict[str, Any], call_id: str | None = None) -> Json:
    return {
        "id": _id("fc"),
        "type": "function_call",
        "status": "completed",
        "call_id": call_id or _id("call"),
        "name": name,
        "arguments": json.dumps(arguments),
    }


def web_search_call(query: str, sources: list[str | Json] | None = None) -> Json:
    """``sources``: URLs (or source dicts), as the API sends them when asked to include them."""
    action: Json = {"type": "search", "query": query, "queries": [query]}
    if sources is not None:
        action["sources"] = [
            {"type": "url", "url": s} if isinstance(s, str) else s for s in sources
        ]
    return {"id": _id("ws"), "type": "web_search_call", "status": "completed", "action": action}


def file_search_call(queries: list[str], results: list[Json] | None = None) -> Json:
    """``results``: dicts with any of file_id, filename, score, text, attributes."""
    full = None
    if results is not None:
        full = [
            {
                "file_id": r.get("file_id", _id("file")),
                "filename": r.get("filename", "document.pdf"),
                "score": r.get("score", 0.9),
                "text": r.get("text", ""),
                "attributes": r.get("attributes", {}),
            }
            for r in results
        ]
    return {
        "id": _id("fs"),
        "type": "file_search_call",
        "status": "completed",
        "queries": list(queries),
        "results": full,
    }


def code_interpreter_call(code: str, outputs: list[str | Json] | None = None) -> Json:
    """``outputs``: log strings (or ``{"type": "image", "url": ...}`` dicts)."""
    return {
        "id": _id("ci"),
        "type": "code_interpreter_call",
        "status": "completed",
        "code": code,
        "container_id": _id("cntr"),
        "outputs": None
        if outputs is None
        else [{"type": "logs", "logs": o} if isinstance(o, str) else o for o in outputs],
    }


def mcp_list_tools(server_label: str, tools: list[str | Json]) -> Json:
    """``tools``: names (or dicts with name, description, input_schema)."""
    return {
        "id": _id("mcpl"),
        "type": "mcp_list_tools",
        "server_label": server_label,
        "tools": [
            {
                "name": t,
                "description": None,
                "annotations": {"read_only": True},
                "input_schema": {"type": "object", "properties": {}},
            }
            if isinstance(t, str)
            else {"input_schema": {"type": "object"}, "annotations": None, **t}
            for t in tools
        ],
        "error": None,
    }


def mcp_call(
    server_label: str,
    name: str,
    arguments: dict[str, Any],
    output: str | None = None,
    error: str | Json | None = None,
) -> Json:
    """``error``: a message (sent as an ``http_error``) or a full error dict."""
    err: Json | None = None
    if isinstance(error, str):
        err = {"type": "http_error", "code": 500, "message": error}
    elif error is not None:
        err = error
    return {
        "id": _id("mcp"),
        "type": "mcp_call",
        "status": "failed" if err else "completed",
        "server_label": server_label,
        "name": name,
        "arguments": json.dumps(arguments),
        "output": output,
        "error": err,
        "approval_request_id": None,
    }


def mcp_approval_request(server_label: str, name: str, arguments: dict[str, Any]) -> Json:
    return {
        "id": _id("mcpr"),
        "type": "mcp_approval_request",
        "server_label": server_label,
        "name": name,
        "arguments": json.dumps(arguments),
    }


def computer_call(action: Json) -> Json:
    """``action``: e.g. ``{"type": "click", "button": "left", "x": 10, "y": 20}``."""
    return {
        "id": _id("cu"),
        "type": "computer_call",
        "status": "completed",
        "call_id": _id("call"),
        "action": action,
        "pending_safety_checks": [],
    }


def image_generation_call(revised_prompt: str, result: str = "iVBORw0KGgo=") -> Json:
    return {
        "id": _id("ig"),
        "type": "image_generation_call",
        "status": "completed",
        "revised_prompt": revised_prompt,
        "result": result,
        "output_format": "png",
        "size": "1024x1024",
        "quality": "high",
        "background": "opaque",
    }


def local_shell_call(command: list[str]) -> Json:
    return {
        "id": _id("lsh"),
        "type": "local_shell_call",
        "status": "completed",
        "call_id": _id("call"),
        "action": {"type": "exec", "command": list(command), "env": {}},
    }


def custom_tool_call(name: str, input: str, call_id: str | None = None) -> Json:
    return {
        "id": _id("ctc"),
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": call_id or _id("call"),
        "name": name,
        "input": input,
    }


def reasoning(summary_text: str | list[str]) -> Json:
    texts = [summary_text] if isinstance(summary_text, str) else list(summary_text)
    return {
        "id": _id("rs"),
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": t} for t in texts],
    }


# -- The reference's two Responses API examples, answered realistically ---------------------------


def spacex_response(tools: list[Json] | None = None) -> Json:
    """What ``gpt-4.1`` with web_search and code_interpreter answers to the SpaceX request."""
    code = (
        "import matplotlib.pyplot as plt\n"
        "from datetime import datetime\n\n"
        "launches = {\n"
        '    "Starlink 10-28": "2025-06-25",\n'
        '    "Transporter-14": "2025-06-23",\n'
        '    "Axiom Mission 4": "2025-06-25",\n'
        "}\n"
        "dates = [datetime.fromisoformat(d) for d in launches.values()]\n"
        "plt.figure(figsize=(8, 3))\n"
        'plt.plot(dates, range(len(dates)), "o")\n'
        "plt.yticks(range(len(dates)), list(launches))\n"
        'plt.title("Latest 3 SpaceX launches")\n'
        "plt.tight_layout()\n"
        "plt.show()\n"
        "print(sorted(d.date().isoformat() for d in dates))"
    )
    text = (
        "The latest SpaceX story: Axiom Mission 4 lifted off on a Falcon 9 from Kennedy Space "
        "Center, carrying four astronauts to the ISS (Space.com). Before it flew Transporter-14 "
        "and Starlink 10-28. The script below plots those three launch dates; it printed "
        "['2025-06-23', '2025-06-25', '2025-06-25']."
    )
    cite = text.index("(Space.com)")
    return response(
        [
            web_search_call(
                "latest SpaceX news launch",
                [
                    "https://www.space.com/spacex-axiom-mission-4-launch",
                    "https://www.spacex.com/launches/",
                ],
            ),
            code_interpreter_call(code, ["['2025-06-23', '2025-06-25', '2025-06-25']\n"]),
            output_message(
                text,
                [
                    url_citation(
                        "https://www.space.com/spacex-axiom-mission-4-launch",
                        "SpaceX launches Axiom Mission 4 to the ISS",
                        cite,
                        cite + len("(Space.com)"),
                    )
                ],
            ),
        ],
        tools=tools,
    )


def crypto_mcp_response(tools: list[Json] | None = None) -> Json:
    """What ``gpt-4.1`` with the CoinGecko MCP server answers to the price question."""
    prices = {"bitcoin": {"usd": 67321.12}, "ethereum": {"usd": 3512.45}}
    return response(
        [
            mcp_list_tools(
                "coingecko",
                [
                    {"name": "get_simple_price", "description": "Current price of coins"},
                    {"name": "get_coins_markets", "description": "Market data for coins"},
                    {"name": "get_search", "description": "Search coins by name"},
                ],
            ),
            mcp_call(
                "coingecko",
                "get_simple_price",
                {"ids": "bitcoin,ethereum", "vs_currencies": "usd"},
                output=json.dumps(prices),
            ),
            output_message(
                "Current prices from CoinGecko:\n- Bitcoin (BTC): $67,321.12\n"
                "- Ethereum (ETH): $3,512.45"
            ),
        ],
        tools=tools,
    )


def reference_response(body: Json) -> Json:
    """An ``on_response`` handler: the answer matching the tools the request offers."""
    tools = list(body.get("tools") or [])
    kinds = {t.get("type") for t in tools}
    if "mcp" in kinds:
        return crypto_mcp_response(tools)
    if kinds & {"web_search", "web_search_preview", "code_interpreter"}:
        return spacex_response(tools)
    return response([output_message("ok")], model=str(body.get("model") or "gpt-4.1"))


# -- Streaming -----------------------------------------------------------------------------------


def _sse(data: Json | str, event: str | None = None) -> str:
    body = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "") + f"data: {body}\n\n"


def _chat_chunks(completion: Json, include_usage: bool) -> Iterator[str]:
    """Server-Sent Events for one completion, split the way the API streams it."""
    base = {
        "id": completion["id"],
        "object": "chat.completion.chunk",
        "created": completion["created"],
        "model": completion["model"],
        "service_tier": completion.get("service_tier"),
        "system_fingerprint": completion.get("system_fingerprint"),
    }

    def chunk(delta: Json, finish: str | None = None, usage: Json | None = None) -> str:
        choices = (
            []
            if usage
            else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        )
        return _sse({**base, "choices": choices, "usage": usage})

    message = completion["choices"][0]["message"]
    yield chunk({"role": "assistant", "content": "", "refusal": None})
    content = message.get("content") or ""
    for start in range(0, len(content), 8):
        yield chunk({"content": content[start : start + 8]})
    if message.get("refusal"):
        yield chunk({"refusal": message["refusal"]})
    for index, call in enumerate(message.get("tool_calls") or []):
        if "function" not in call:  # custom tool calls arrive whole
            yield chunk({"tool_calls": [{"index": index, **call}]})
            continue
        fn = call["function"]
        first = {"name": fn["name"], "arguments": ""}
        opening = {"index": index, "id": call["id"], "type": "function", "function": first}
        yield chunk({"tool_calls": [opening]})
        args = fn["arguments"]
        for start in range(0, len(args), 10):
            part = {"arguments": args[start : start + 10]}
            yield chunk({"tool_calls": [{"index": index, "function": part}]})
    yield chunk({}, completion["choices"][0]["finish_reason"])
    if include_usage:
        yield chunk({}, usage=completion.get("usage"))
    yield "data: [DONE]\n\n"


def _response_events(resp: Json) -> Iterator[str]:
    """Responses API streaming events for one complete response."""
    seq = itertools.count()

    def ev(kind: str, **fields: Any) -> str:
        return _sse({"type": kind, "sequence_number": next(seq), **fields}, event=kind)

    pending = {**resp, "status": "in_progress", "output": [], "usage": None}
    yield ev("response.created", response=pending)
    yield ev("response.in_progress", response=pending)
    for index, item in enumerate(resp["output"]):
        if item["type"] == "message":
            yield ev(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            for ci, part in enumerate(item["content"]):
                ids = {"item_id": item["id"], "output_index": index, "content_index": ci}
                if part["type"] == "output_text":
                    empty = {**part, "text": "", "annotations": []}
                    yield ev("response.content_part.added", part=empty, **ids)
                    text = part["text"]
                    for start in range(0, len(text), 8):
                        delta = text[start : start + 8]
                        yield ev("response.output_text.delta", delta=delta, logprobs=[], **ids)
                    for ai, ann in enumerate(part.get("annotations") or []):
                        yield ev(
                            "response.output_text.annotation.added",
                            annotation_index=ai,
                            annotation=ann,
                            **ids,
                        )
                    yield ev("response.output_text.done", text=text, logprobs=[], **ids)
                else:
                    yield ev("response.content_part.added", part={**part, "refusal": ""}, **ids)
                    yield ev("response.refusal.delta", delta=part["refusal"], **ids)
                    yield ev("response.refusal.done", refusal=part["refusal"], **ids)
                yield ev("response.content_part.done", part=part, **ids)
        elif item["type"] == "function_call":
            yield ev(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            ids = {"item_id": item["id"], "output_index": index}
            yield ev("response.function_call_arguments.delta", delta=item["arguments"], **ids)
            yield ev("response.function_call_arguments.done", arguments=item["arguments"], **ids)
        else:
            yield ev("response.output_item.added", output_index=index, item=item)
        yield ev("response.output_item.done", output_index=index, item=item)
    yield ev("response.completed", response=resp)


# -- The server ----------------------------------------------------------------------------------


def _error(
    status: int, message: str, kind: str = "invalid_request_error"
) -> http_responses.JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return http_responses.JSONResponse(body, status_code=status)


class OpenAIStandIn:
    """The stand-in server. Use as a context manager, or ``start()`` / ``stop()``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._chat: deque[Json] = deque()
        self._responses: deque[Json] = deque()
        self._failures: deque[tuple[str, int, str]] = deque()
        self._on_chat: ChatHandler | None = None
        self._on_response: ResponseHandler | None = None
        self.requests: list[Json] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit this: without it, a response written in two parts waits
        # ~40 ms for a delayed ACK on loopback.
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # -- test controls ---------------------------------------------------------------------------

    def queue_chat(self, *completions: Json) -> None:
        """The next POSTs to /v1/chat/completions answer these, in order."""
        with self._lock:
            self._chat.extend(completions)

    def queue_response(self, *responses: Json) -> None:
        """The next POSTs to /v1/responses answer these, in order."""
        with self._lock:
            self._responses.extend(responses)

    def on_chat(self, fn: ChatHandler | None) -> None:
        """``fn(request_body) -> completion`` answers chat requests when the queue is empty."""
        self._on_chat = fn

    def on_response(self, fn: ResponseHandler | None) -> None:
        """``fn(request_body) -> response`` answers /v1/responses when the queue is empty
        (e.g. ``reference_response``)."""
        self._on_response = fn

    def fail(self, status: int, message: str = "stand-in failure", path: str = "") -> None:
        """The next request whose path contains ``path`` answers an OpenAI-style error."""
        with self._lock:
            self._failures.append((path, status, message))

    def reset(self) -> None:
        with self._lock:
            self._chat.clear()
            self._responses.clear()
            self._failures.clear()
            self._on_chat = None
            self._on_response = None
            self.requests.clear()

    # -- request handling ------------------------------------------------------------------------

    def _take_failure(self, path: str) -> tuple[int, str] | None:
        with self._lock:
            for entry in self._failures:
                if entry[0] in path:
                    self._failures.remove(entry)
                    return entry[1], entry[2]
        return None

    def _next_chat(self, body: Json) -> Json:
        with self._lock:
            queued = self._chat.popleft() if self._chat else None
        if queued is not None:
            return queued
        if self._on_chat is not None:
            return self._on_chat(body)
        return chat_completion(content="ok", model=str(body.get("model") or "gpt-4o-mini"))

    def _next_response(self, body: Json) -> Json:
        with self._lock:
            queued = self._responses.popleft() if self._responses else None
        if queued is not None:
            return queued
        if self._on_response is not None:
            return self._on_response(body)
        return response([output_message("ok")], model=str(body.get("model") or "gpt-4.1"))

    def _app(self) -> fastapi.FastAPI:
        app = fastapi.FastAPI()

        async def read(request: fastapi.Request) -> Json:
            try:
                body = json.loads(await request.body() or b"{}")
            except ValueError:
                body = {"_raw": (await request.body()).decode(errors="replace")}
            with self._lock:
                self.requests.append({"path": request.url.path, "body": body})
            return body if isinstance(body, dict) else {"_raw": body}

        @app.post("/v1/chat/completions")
        async def chat(request: fastapi.Request) -> http_responses.Response:
            body = await read(request)
            failure = self._take_failure(request.url.path)
            if failure:
                return _error(*failure)
            if not body.get("messages"):
                return _error(400, "Missing required parameter: 'messages'.")
            completion = self._next_chat(body)
            if body.get("stream"):
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                return http_responses.StreamingResponse(
                    _aiter(_chat_chunks(completion, usage)), media_type="text/event-stream"
                )
            return http_responses.JSONResponse(completion)

        @app.post("/v1/responses")
        async def responses(request: fastapi.Request) -> http_responses.Response:
            body = await read(request)
            failure = self._take_failure(request.url.path)
            if failure:
                return _error(*failure)
            if "input" not in body and "previous_response_id" not in body:
                return _error(400, "Missing required parameter: 'input'.")
            resp = self._next_response(body)
            if body.get("stream"):
                return http_responses.StreamingResponse(
                    _aiter(_response_events(resp)), media_type="text/event-stream"
                )
            return http_responses.JSONResponse(resp)

        @app.api_route("/{path:path}", methods=["GET", "POST", "DELETE", "PUT", "PATCH"])
        async def other(path: str, request: fastapi.Request) -> http_responses.Response:
            await read(request)
            return _error(404, f"Invalid URL ({request.method} /{path})")

        return app

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> OpenAIStandIn:
        config = uvicorn.Config(self._app(), log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("OpenAI stand-in did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._sock.close()
        self._server = None
        self._thread = None

    def __enter__(self) -> OpenAIStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _aiter(chunks: Iterator[str]) -> Any:
    for part in chunks:
        yield part
        await asyncio.sleep(0)
