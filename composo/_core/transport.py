"""HTTP transports that give every connection its own httpcore pool.

httpcore's pool re-examines each of its connections every time a request starts or ends (under
asyncio each check goes through anyio's socket attributes; with threads, all of it under one
lock they queue on): the work per request grows with the pool's size. A pool of one connection
does the least of it, so these transports hold one pool per connection and hand each request an
idle one (the most recently freed, whose connection is warm), which is O(1). Only when every
connection is busy does a request queue, on the least busy one.

The connections are counted in groups of at most ``pool_size`` (``busy``), so callers can see the
load spread across them; ``max_connections`` is rounded up to fill the groups evenly. Each
connection holds a request's writes until its answer is read, so the head and a small body leave
in one write (the async one here, the sync one through the deadline it is prepared with).
"""

from __future__ import annotations

import contextlib
import math
import os
import ssl
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpcore
import httpx

from composo._core.coalesce import HeldWrites

__all__ = ["ShardedAsyncTransport", "ShardedTransport"]

POOL_SIZE = 8


class _CoalescingStream(httpcore.AsyncNetworkStream):
    __slots__ = ("_held", "_inner")

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._held = HeldWrites()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if pending := self._held.take():
            await self._inner.write(pending, timeout)
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if now := self._held.add(buffer):
            await self._inner.write(now, timeout)

    async def aclose(self) -> None:
        self._held.take()
        await self._inner.aclose()

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        return _CoalescingStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _CoalescingBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _CoalescingStream(stream)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:  # pragma: no cover (the client speaks TCP)
        return _CoalescingStream(
            await self._inner.connect_unix_socket(path, timeout, socket_options)
        )

    async def sleep(self, seconds: float) -> None:  # pragma: no cover (retries are the client's)
        await self._inner.sleep(seconds)


def _coalescing(transport: httpx.AsyncHTTPTransport) -> httpx.AsyncHTTPTransport:
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if isinstance(pool, httpcore.AsyncConnectionPool) and backend is not None:
        pool._network_backend = _CoalescingBackend(backend)
    return transport


class _Shards:
    """Which of ``count`` one-connection pools takes the next request: an idle one (the most
    recently freed, whose connection is warm), else the least loaded; O(1) while any is idle.
    ``lock`` is for threads; one event loop needs none (nothing awaits inside)."""

    def __init__(self, count: int, per_group: int, lock: threading.Lock | None = None) -> None:
        self._group_of = [i // per_group for i in range(count)]
        self._groups = math.ceil(count / per_group)
        self._load = [0] * count  # requests in progress (or queued) per connection
        # Idle connections, most recently freed last; reversed so the first ones go out first.
        self._idle = list(reversed(range(count)))
        self._lock: contextlib.AbstractContextManager[Any] = lock or contextlib.nullcontext()

    def busy(self) -> list[int]:
        out = [0] * self._groups
        with self._lock:
            for index, load in enumerate(self._load):
                out[self._group_of[index]] += load
        return out

    def take(self) -> int:
        with self._lock:
            if self._idle:
                index = self._idle.pop()
            else:
                index = min(range(len(self._load)), key=self._load.__getitem__)
            self._load[index] += 1
            return index

    def give_back(self, index: int) -> None:
        with self._lock:
            self._load[index] -= 1
            if not self._load[index]:
                self._idle.append(index)


def _shared_tls(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with one TLS context for all the pools: making one loads the CA bundle, tens
    of milliseconds each, which the first request would wait for once per connection."""
    if not isinstance(options.get("verify"), ssl.SSLContext):  # True, False or a CA path
        options = dict(options)
        options["verify"] = _tls_context(
            options.get("verify", True), options.pop("cert", None), options.get("trust_env", True)
        )
    return options


_TLS: dict[tuple[Any, ...], ssl.SSLContext] = {}
_TLS_LOCK = threading.Lock()


def _tls_context(verify: Any, cert: Any, trust_env: bool) -> ssl.SSLContext:
    """The TLS context for these settings. The default ones (``verify=True`` or ``False``, no
    client certificate) share one context per process and CA environment, so a client made per
    request or per worker does not load the CA bundle again each time."""
    if cert is not None or not isinstance(verify, bool):
        return httpx.create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)
    env = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")) if trust_env else ()
    key = (verify, *env)
    with _TLS_LOCK:
        context = _TLS.get(key)
        if context is None:
            context = _TLS[key] = httpx.create_ssl_context(verify=verify, trust_env=trust_env)
    return context


def _sizes(max_connections: int, pool_size: int) -> tuple[int, int]:
    """The connections, rounded up to fill the groups evenly, and the size of a group."""
    groups = max(1, math.ceil(max_connections / pool_size))
    per_group = math.ceil(max_connections / groups)
    return groups * per_group, per_group


_ONE = httpx.Limits(max_connections=1, max_keepalive_connections=1)


class _Released(httpx.AsyncByteStream):
    """The response body; closing it gives the request's connection back."""

    __slots__ = ("_release", "_stream")

    def __init__(self, stream: httpx.AsyncByteStream, release: Callable[[], None]) -> None:
        self._stream = stream
        self._release: Callable[[], None] | None = release

    def __aiter__(self) -> AsyncIterator[bytes]:
        # The inner stream's own iterator: no extra generator frame per chunk.
        return self._stream.__aiter__()

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


class ShardedAsyncTransport(httpx.AsyncBaseTransport):
    """``max_connections`` keep-alive connections, each in its own pool, counted in groups of
    at most ``pool_size``. ``options`` go to each :class:`httpx.AsyncHTTPTransport`."""

    def __init__(self, max_connections: int, pool_size: int = POOL_SIZE, **options: Any) -> None:
        count, per_group = _sizes(max_connections, pool_size)
        options = _shared_tls(options)
        self._pools = [
            _coalescing(httpx.AsyncHTTPTransport(limits=_ONE, **options)) for _ in range(count)
        ]
        self._shards = _Shards(count, per_group)

    @property
    def busy(self) -> list[int]:
        """Requests in progress per group (a response counts until its body is closed)."""
        return self._shards.busy()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        shards = self._shards
        index = shards.take()
        try:
            response = await self._pools[index].handle_async_request(request)
        except BaseException:
            shards.give_back(index)
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Released(response.stream, lambda: shards.give_back(index))
        return response

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()


class _ReleasedSync(httpx.SyncByteStream):
    """The sync response body; closing it gives the request's connection back."""

    __slots__ = ("_release", "_stream")

    def __init__(self, stream: httpx.SyncByteStream, release: Callable[[], None]) -> None:
        self._stream = stream
        self._release: Callable[[], None] | None = release

    def __iter__(self) -> Iterator[bytes]:
        return self._stream.__iter__()

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


class ShardedTransport(httpx.BaseTransport):
    """The sync counterpart, for threads: httpcore's sync pool examines every connection under
    one lock each time a request starts or ends, so with many threads they queue on that lock.
    ``prepare`` is called with each :class:`httpx.HTTPTransport` made (the clients put their
    deadline under it)."""

    def __init__(
        self,
        max_connections: int,
        pool_size: int = POOL_SIZE,
        prepare: Callable[[httpx.HTTPTransport], object] | None = None,
        **options: Any,
    ) -> None:
        count, per_group = _sizes(max_connections, pool_size)
        options = _shared_tls(options)
        self._pools = [httpx.HTTPTransport(limits=_ONE, **options) for _ in range(count)]
        if prepare is not None:
            for pool in self._pools:
                prepare(pool)
        self._shards = _Shards(count, per_group, threading.Lock())

    @property
    def busy(self) -> list[int]:
        """Requests in progress per group (a response counts until its body is closed)."""
        return self._shards.busy()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        shards = self._shards
        index = shards.take()
        try:
            response = self._pools[index].handle_request(request)
        except BaseException:
            shards.give_back(index)
            raise
        assert isinstance(response.stream, httpx.SyncByteStream)
        response.stream = _ReleasedSync(response.stream, lambda: shards.give_back(index))
        return response

    def close(self) -> None:
        for pool in self._pools:
            pool.close()
