"""The ASGI layer in front of ``/api/v1`` (and ``/_dev``): what a request's head can decide is
answered before its body is read (a key in the query string 400 on every path, since URLs reach
logs; the API key 401; a declared length 413; the rate limit 429), then the body is counted as it
streams."""

from __future__ import annotations

import hmac
import math
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, NamedTuple

from fastapi import Depends
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from composo.server._bodies import refusal
from composo.server._config import ServerConfig
from composo.server._devswitch import DevSwitch, Fault
from composo.server._received import with_headers
from composo.server._redact import credential_parameter

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send


_BODY_KEY = "composo.body"
_API_KEY = "composo.api_key"
_API_PREFIX = "/api/v1/"
_DEV_PREFIX = "/_dev/"
_EVAL_PREFIX = "/api/v1/evals/"
# A body answered before it was read is left for uvicorn to discard (the client reads the answer,
# not a reset connection), unless declared this many times over the limit: then it is closed.
DISCARD_FACTOR = 4


class KeyCheck:
    """Accepts any key when none is configured; otherwise compares in constant time."""

    def __init__(self, keys: Sequence[str]) -> None:
        self.keys = tuple(k.encode() for k in keys)  # also told apart in a URL
        self.open = not self.keys

    def problem(self, presented: bytes | None) -> str | None:
        """Why ``presented`` is refused, or ``None`` when it is accepted."""
        if self.open:
            return None
        if not presented:
            return "missing API key: send it in the API-Key header"
        # Every key is compared, so timing does not reveal which one came close.
        matches = [hmac.compare_digest(presented, key) for key in self.keys]
        return None if any(matches) else "invalid API key"


class RateLimiter:
    """A token bucket per client: ``per_minute``, bursts up to ``burst`` (default: a minute's).
    Refilled buckets are dropped, and at most ``max_clients`` kept (least recently seen go)."""

    def __init__(
        self, per_minute: float, max_clients: int = 10_000, burst: float | None = None
    ) -> None:
        self.per_minute = per_minute
        self._rate = per_minute / 60.0
        self._capacity = max(1.0, per_minute if burst is None else burst)
        self._max_clients = max_clients
        self._buckets: dict[bytes, tuple[float, float]] = {}
        self._next_sweep = 0.0

    def retry_after(self, key: bytes) -> int:
        """0 when the request may go now (and counts it); otherwise whole seconds to wait."""
        now = time.monotonic()
        tokens = self._level(self._buckets.pop(key, None), now)
        self._sweep(now)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return 0
        self._buckets[key] = (tokens, now)
        return max(1, math.ceil((1.0 - tokens) / self._rate))

    def headers(self, key: bytes) -> list[tuple[bytes, bytes]]:
        """``X-RateLimit-Limit``, ``-Remaining`` and ``-Reset`` (seconds until one more may go)
        for ``key``, without counting a request, so a client can pace itself before a 429."""
        tokens = self._level(self._buckets.get(key), time.monotonic())
        reset = 0 if tokens >= self._capacity else math.ceil((1.0 - tokens % 1.0) / self._rate)
        return [
            (b"x-ratelimit-limit", f"{self.per_minute:g}".encode()),
            (b"x-ratelimit-remaining", str(math.floor(tokens)).encode()),
            (b"x-ratelimit-reset", str(reset).encode()),
        ]

    def _level(self, bucket: tuple[float, float] | None, now: float) -> float:
        tokens, last = bucket or (self._capacity, now)
        return min(self._capacity, tokens + (now - last) * self._rate)

    def _sweep(self, now: float) -> None:
        """Forget full buckets (a full bucket is the same as none) and keep the table bounded."""
        if now >= self._next_sweep:
            self._buckets = {
                k: (tokens, last)
                for k, (tokens, last) in self._buckets.items()
                if tokens + (now - last) * self._rate < self._capacity
            }
            self._next_sweep = now + 60.0
        while len(self._buckets) >= self._max_clients:
            del self._buckets[next(iter(self._buckets))]  # least recently seen


class _Head(NamedTuple):
    api_key: bytes | None
    declared: int  # the Content-Length, else 0; -1 when it is no number (h11 refuses those)
    chunked: bool


def _head(scope: Scope) -> _Head:
    named = dict(scope["headers"])
    length = named.get(b"content-length", b"0")
    declared = int(length) if length.isdigit() else -1
    return _Head(named.get(b"api-key"), declared, b"transfer-encoding" in named)


_Refusal = tuple[int, str, dict[str, str]]


class Gate:
    def __init__(self, app: ASGIApp, config: ServerConfig, dev: DevSwitch | None) -> None:
        self.app, self.dev = app, dev
        self.keys = KeyCheck(config.api_keys)
        self.max_body_bytes = config.max_body_bytes
        rate = config.rate_limit_per_minute
        self.limiter = None if rate is None else RateLimiter(rate, burst=config.rate_limit_burst)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        leaked = credential_parameter(scope.get("query_string", b""), self.keys.keys)
        head = _head(scope)
        path: str = scope["path"]
        dev_path = self.dev is not None and path.startswith(_DEV_PREFIX)
        guarded = leaked is not None or path.startswith(_API_PREFIX) or dev_path
        # A route that counts its own body (OTLP): only a declared length is checked first.
        if not guarded and head.declared <= self.max_body_bytes:
            await self.app(scope, receive, send)
            return
        # An ``x-request-id`` on every answer, as the platform does, so errors can cite it.
        send = with_headers(send, [(b"x-request-id", uuid.uuid4().hex.encode())])
        if head.declared < 0:  # under an ASGI server that lets it through
            await _answer(400, "Content-Length is not a number", close=True)(scope, receive, send)
            return
        refusal = self._refusal(scope, head, leaked) if guarded else (413, self._too_large(), {})
        if refusal is None and self.limiter is not None:
            send, refusal = self._rate(scope, head.api_key, send, self.limiter)
        if refusal is not None:
            # What to do with the unread body: nothing to do without one.
            close = head.chunked or head.declared > DISCARD_FACTOR * self.max_body_bytes
            await _answer(*refusal, close=close)(scope, receive, send)
            return
        try:
            await self._admitted(scope, receive, send, head)
        finally:
            scope.pop(_BODY_KEY, None)  # a kept-alive connection's scope outlives the answer

    def _refusal(self, scope: Scope, head: _Head, leaked: str | None) -> _Refusal | None:
        """400 for a credential in the URL, 401 for the key, 413 for a declared length."""
        problem = self.keys.problem(head.api_key)
        if leaked is not None:
            status = 400
            detail = (
                f"query parameter {leaked!r}: this server takes no credentials in the URL "
                "(URLs are written to logs); send the key in the API-Key header"
            )
        elif problem is not None:
            status, detail = 401, problem
        elif head.declared > self.max_body_bytes:
            return 413, self._too_large(), {}
        else:
            return None
        if self.dev is not None and scope["path"].startswith(_EVAL_PREFIX):
            self.dev.record(scope, b"", refused=status)
        return status, detail, {}

    def _rate(
        self, scope: Scope, api_key: bytes | None, send: Send, limiter: RateLimiter
    ) -> tuple[Send, _Refusal | None]:
        """POSTs are counted; every answer says where the quota stands."""
        # Without configured keys any key is accepted, so the key cannot tell clients apart.
        client = scope.get("client")
        who = (client[0] if client else "").encode() if self.keys.open else api_key or b""
        wait = limiter.retry_after(who) if scope["method"] == "POST" else 0
        send = with_headers(send, limiter.headers(who))
        if not wait:
            return send, None
        detail = (
            f"rate limit of {limiter.per_minute:g} requests per minute reached; retry in {wait}s"
        )
        return send, (429, detail, {"retry-after": str(wait)})

    async def _admitted(self, scope: Scope, receive: Receive, send: Send, head: _Head) -> None:
        path: str = scope["path"]
        try:
            has_body = head.declared or head.chunked
            body = (
                await read_body(Request(scope, receive), self.max_body_bytes) if has_body else b""
            )
        except ClientDisconnect:
            return
        if body is None:
            await _answer(413, self._too_large(), close=True)(scope, receive, send)
            return
        if self.dev is not None and path.startswith(_EVAL_PREFIX):
            self.dev.record(scope, body)
            fault = self.dev.take(path)
            if fault is not None and await _fault(fault, self.dev, scope, receive, send):
                return
        scope[_BODY_KEY] = body
        scope[_API_KEY] = head.api_key
        await self.app(scope, _no_more(receive), send)

    def _too_large(self) -> str:
        return (
            f"request body is over this server's limit of {self.max_body_bytes} bytes; "
            "send fewer or shorter messages (or start the server with a larger --max-body-bytes)"
        )


# Coroutines, though they never wait: FastAPI runs a plain function dependency in its thread
# pool, two thread hops on every request for two dictionary lookups.
async def _admitted_key(request: Request) -> bytes | None:
    return request.scope.get(_API_KEY)


async def _admitted_body(request: Request) -> bytes:
    return bytes(request.scope.get(_BODY_KEY, b""))  # the same object: no copy


ApiKey = Annotated[bytes | None, Depends(_admitted_key)]
Body = Annotated[bytes, Depends(_admitted_body)]


async def read_body(request: Request, limit: int) -> bytes | None:
    """The body, counted as it streams: ``None`` at the first byte over ``limit``, whatever
    length was declared (a chunked body included)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


async def _fault(fault: Fault, dev: DevSwitch, scope: Scope, receive: Receive, send: Send) -> bool:
    """Apply ``fault``; ``True`` when the request was answered (or dropped) by it."""
    if fault.delay:
        await dev.delay(fault.delay)
    if fault.drop:
        # A head that promises a body which never comes: returning without finishing it makes
        # uvicorn close the connection, as when a server dies mid-answer.
        headers = [(b"content-length", b"100")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        return True
    if fault.status is not None:
        extra = {"retry-after": fault.retry_after} if fault.retry_after is not None else {}
        detail = fault.detail or f"injected fault {fault.status}"
        await _answer(fault.status, detail, extra)(scope, receive, send)
        return True
    return False


def _no_more(receive: Receive) -> Receive:
    """The body was read: the application sees one empty message, then what comes next."""
    done = False

    async def rest() -> Message:
        nonlocal done
        if not done:
            done = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return await receive()

    return rest


def _answer(
    status: int, detail: str, headers: dict[str, str] | None = None, close: bool = False
) -> Response:
    return refusal(detail, status, {**(headers or {}), "connection": "close"} if close else headers)
