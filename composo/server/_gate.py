"""The outermost ASGI layer in front of ``/api/v1`` (and ``/_dev`` when switched on).

Everything a request's head can decide is decided before one byte of its body is read: a key in
the query string (400, on every path: it would end up in logs), the API key (401), the rate
limit (429) and a declared length over the limit (413) are answered at once. Only then is the
body read, counted as it streams (a chunked body is cut at the limit). Written as plain ASGI so
it costs microseconds.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from composo.server._asgi import ASGIApp, Message, Receive, Scope, Send
from composo.server._bodies import dumps
from composo.server._devswitch import DevSwitch, Fault
from composo.server._guards import KeyCheck, RateLimiter
from composo.server._redact import credential_parameter

__all__ = ["API_KEY_SCOPE_KEY", "BODY_SCOPE_KEY", "DISCARD_FACTOR", "Gate"]

_log = logging.getLogger("composo.server")

BODY_SCOPE_KEY = "composo.body"
API_KEY_SCOPE_KEY = "composo.api_key"
_API_PREFIX = "/api/v1/"
_DEV_PREFIX = "/_dev/"
_EVAL_PREFIX = "/api/v1/evals/"
# A body answered before it was read is left for uvicorn to discard as it arrives (so the client
# reads the answer instead of a reset connection), unless it is declared this many times over the
# limit: then the connection is closed at once.
DISCARD_FACTOR = 4


class _TooLarge(Exception):
    pass


class _Gone(Exception):
    pass


class Gate:
    def __init__(
        self,
        app: ASGIApp,
        *,
        keys: KeyCheck,
        max_body_bytes: int,
        limiter: RateLimiter | None,
        dev: DevSwitch | None,
    ) -> None:
        self.app = app
        self.keys = keys
        self.max_body_bytes = max_body_bytes
        self.limiter = limiter
        self.dev = dev

    def _guards(self, path: str) -> bool:
        return path.startswith(_API_PREFIX) or (
            self.dev is not None and path.startswith(_DEV_PREFIX)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        leaked = credential_parameter(scope.get("query_string", b""), self.keys.keys)
        if leaked is None and not self._guards(scope["path"]):
            await self._unguarded(scope, receive, send)
            return
        send = _with_request_id(send)
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        api_key: bytes | None = None
        length: bytes | None = None
        chunked = False
        for name, value in headers:
            if name == b"api-key":
                api_key = value
            elif name == b"content-length":
                length = value
            elif name == b"transfer-encoding":
                chunked = True
        path: str = scope["path"]
        method: str = scope["method"]
        try:
            declared = None if length is None else int(length)
        except ValueError:
            await _answer(send, 400, "Content-Length is not a number", close=True)
            return
        # What to do with an unread body after an early answer: nothing to do without one.
        close = chunked or (declared or 0) > DISCARD_FACTOR * self.max_body_bytes

        if leaked is not None:
            if self.dev is not None and path.startswith(_EVAL_PREFIX):
                self.dev.record_refused(method, path, 400)
            await _answer(
                send,
                400,
                f"query parameter {leaked!r}: this server takes no credentials in the URL (URLs "
                "are written to logs); send the key in the API-Key header",
                close=close,
            )
            return
        problem = self.keys.problem(api_key)
        if problem is not None:
            if self.dev is not None and path.startswith(_EVAL_PREFIX):
                self.dev.record_refused(method, path, 401)
            await _answer(send, 401, problem, close=close)
            return
        if declared is not None and declared > self.max_body_bytes:
            await _answer(send, 413, self._too_large(), close=close)
            return
        if self.limiter is not None:
            # Without configured keys any key is accepted, so the key cannot tell clients apart.
            client = scope.get("client")
            who = (client[0] if client else "").encode() if self.keys.open else api_key or b""
            # POSTs are counted; every answer says where the quota stands.
            wait = self.limiter.retry_after(who) if method == "POST" else 0
            send = _with_headers(send, self.limiter.headers(who))
            if wait:
                await _answer(
                    send,
                    429,
                    f"rate limit of {self.limiter.per_minute:g} requests per minute reached; "
                    f"retry in {wait}s",
                    {"retry-after": str(wait)},
                    close=close,
                )
                return
        try:
            await self._admitted(scope, receive, send, api_key, bool(declared or chunked))
        finally:
            scope.pop(BODY_SCOPE_KEY, None)  # a kept-alive connection's scope outlives the answer

    async def _unguarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A route that reads its own body (the OTLP receiver, which counts it as it streams):
        a declared length still counts against the limit before the application reads a byte."""
        declared = 0
        for name, value in scope["headers"]:
            if name == b"content-length":
                declared = int(value) if value.isdigit() else 0
        if declared > self.max_body_bytes:
            close = declared > DISCARD_FACTOR * self.max_body_bytes
            await _answer(_with_request_id(send), 413, self._too_large(), close=close)
            return
        await self.app(scope, receive, send)

    async def _admitted(
        self, scope: Scope, receive: Receive, send: Send, api_key: bytes | None, has_body: bool
    ) -> None:
        """Read the body and hand the request on."""
        path: str = scope["path"]
        method: str = scope["method"]
        try:
            body = await self._read(receive) if has_body else b""
        except _TooLarge:
            await _answer(send, 413, self._too_large(), close=True)
            return
        except _Gone:
            return
        if self.dev is not None and path.startswith(_EVAL_PREFIX):
            self.dev.record(method, path, scope["headers"], body)
            fault = self.dev.take(path)
            if fault is not None and await self._fault(fault, receive, send):
                return
        scope[BODY_SCOPE_KEY] = body
        scope[API_KEY_SCOPE_KEY] = api_key
        await self.app(scope, _no_more(receive), send)

    def _too_large(self) -> str:
        return (
            f"request body is over this server's limit of {self.max_body_bytes} bytes; "
            "send fewer or shorter messages (or start the server with a larger --max-body-bytes)"
        )

    async def _read(self, receive: Receive) -> bytes:
        """The body, counted as it arrives: :class:`_TooLarge` at the first byte over the
        limit, whatever length was declared."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Gone
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _fault(self, fault: Fault, receive: Receive, send: Send) -> bool:
        """Apply ``fault``; ``True`` when the request was answered (or dropped) by it."""
        if fault.delay:
            await asyncio.sleep(fault.delay)
        if fault.drop:
            await _drop(send)
            return True
        if fault.status is not None:
            extra = {"retry-after": fault.retry_after} if fault.retry_after is not None else {}
            await _answer(
                send, fault.status, fault.detail or f"injected fault {fault.status}", extra
            )
            return True
        return False


def _no_more(receive: Receive) -> Receive:
    """The body has been read: the application sees it as one empty message, then whatever
    the server says next (a disconnect)."""
    done = False

    async def rest() -> Message:
        nonlocal done
        if not done:
            done = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return await receive()

    return rest


def _with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    """Add ``extra`` headers to the answer (the rate limit's state as the request was counted)."""

    async def tagged(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return tagged


def _with_request_id(send: Send) -> Send:
    """Tag every answer with an ``x-request-id``, as the platform does, so errors can cite it."""
    return _with_headers(send, [(b"x-request-id", uuid.uuid4().hex.encode())])


async def _answer(
    send: Send, status: int, detail: str, headers: dict[str, str] | None = None, close: bool = False
) -> None:
    body = dumps({"detail": detail})
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    if close:
        raw.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def _drop(send: Send) -> None:
    """End the exchange without a whole answer: a head that promises a body which never comes.
    Returning without finishing it makes uvicorn close the connection, so the client sees a
    broken connection, as when a server dies mid-answer."""
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"100")]}
    )
