"""An async HTTP transport made of several small connection pools instead of one large one.

httpcore's pool re-examines every one of its connections each time a request starts or ends, and
under asyncio each check goes through anyio's socket attributes; with 32 connections that costs
about 3 ms of CPU per request, three times the rest of the request. Pools of at most 8 connections
keep the check cheap; each request goes to the least busy pool.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

import httpx

__all__ = ["ShardedAsyncTransport"]

POOL_SIZE = 8


class _Released(httpx.AsyncByteStream):
    """The response body; closing it frees the request's place in its pool's count."""

    def __init__(self, stream: httpx.AsyncByteStream, release: Any) -> None:
        self._stream = stream
        self._release = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            self._release()


class ShardedAsyncTransport(httpx.AsyncBaseTransport):
    """``max_connections`` spread over pools of at most ``pool_size``, each kept alive."""

    def __init__(self, max_connections: int, pool_size: int = POOL_SIZE, **options: Any) -> None:
        count = max(1, math.ceil(max_connections / pool_size))
        per_pool = math.ceil(max_connections / count)
        limits = httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool)
        self._pools = [httpx.AsyncHTTPTransport(limits=limits, **options) for _ in range(count)]
        self._busy = [0] * count

    @property
    def busy(self) -> list[int]:
        """Requests in progress per pool (a response counts until its body is closed)."""
        return list(self._busy)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        # One event loop runs this, and nothing awaits between choosing and counting.
        index = min(range(len(self._pools)), key=self._busy.__getitem__)
        self._busy[index] += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._busy[index] -= 1

        try:
            response = await self._pools[index].handle_async_request(request)
        except BaseException:
            release()
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Released(response.stream, release)
        return response

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()
