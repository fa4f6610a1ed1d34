"""The outermost ASGI layer: names the judge (and its model) on every answer and, when asked,
keeps a bounded record of the requests received (``LocalServer.requests``)."""

from __future__ import annotations

import collections
import json
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from composo._core.provenance import JUDGE_HEADER, JUDGE_MODEL_HEADER

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie"}
)


@dataclass(frozen=True)
class Received:
    """One request: headers lower-cased with credentials as ``"***"``, the body cut at the log's
    ``max_body_bytes``, the status answered (``None``: none), and ``time.time()`` on arrival."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int | None
    at: float = field(default=0.0)

    def json(self) -> Any:
        """The body parsed as JSON; ``ValueError`` if it is not (or was cut at the limit)."""
        return json.loads(self.body)


class ReceivedLog:
    """The last ``limit`` requests, oldest first; thread-safe."""

    def __init__(self, limit: int, max_body_bytes: int = 1 << 20) -> None:
        self._items: collections.deque[Received] = collections.deque(maxlen=limit)
        self._lock = threading.Lock()
        self.max_body_bytes = max_body_bytes

    def add(self, item: Received) -> None:
        with self._lock:
            self._items.append(item)

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def judge_header_app(
    app: ASGIApp, judge: str, log: ReceivedLog | None = None, model: str | None = None
) -> ASGIApp:
    """``app`` naming the judge (and ``model``) on every answer, each request kept in ``log``."""
    named = [(JUDGE_HEADER.encode(), judge.encode("latin-1", "replace"))]
    if model:
        named.append((JUDGE_MODEL_HEADER.encode(), model.encode("latin-1", "replace")))

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if log is None or scope.get("type") != "http":
            await app(scope, receive, with_headers(send, named))
            return
        body = bytearray()
        kept = False

        def keep(status: int | None) -> None:
            nonlocal kept
            if kept:
                return
            kept = True
            pairs = (
                (k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]
            )
            headers = {k: "***" if k in SECRET_HEADERS else v for k, v in pairs}
            method, path = str(scope.get("method", "")), str(scope.get("path", ""))
            log.add(Received(method, path, headers, bytes(body), status, time.time()))

        async def recv() -> Message:
            message = await receive()
            if message.get("type") == "http.request":
                body.extend(message.get("body", b"")[: log.max_body_bytes - len(body)])
            return message

        async def snd(message: Message) -> None:
            if message.get("type") == "http.response.start":
                # Kept before the answer leaves, so a caller that has its answer sees the entry.
                keep(int(message["status"]))
            await send(message)

        try:
            await app(scope, recv, with_headers(snd, named))
        finally:
            keep(None)

    return wrapped


def with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    """``send`` adding ``extra`` to the answer's head."""

    async def tagged(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return tagged
