"""The clients' own connections, through the proxies and CA bundle :class:`Network` names.

``httpx.Timeout`` bounds each socket operation on its own (a server sending a byte every half
second could hold a blocking call for ever), so :class:`Connections` is httpcore's pool on a
network backend whose every wait ends at the thread's :func:`deadline`. The async client needs
none of this (``asyncio.timeout`` cancels anywhere): :class:`AsyncShards` are small httpx pools.
"""

from __future__ import annotations

import contextlib
import math
import socket
import ssl
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any, TypeVar

import httpcore
import httpx

from composo._core import cancel
from composo._core.network import Network

_local = threading.local()
T = TypeVar("T")


@contextlib.contextmanager
def deadline(at: float) -> Iterator[None]:
    """Within the block, this thread's socket waits end by ``at`` (``time.monotonic()``)."""
    outer = getattr(_local, "deadline", None)
    _local.deadline = at if outer is None else min(outer, at)
    try:
        yield
    finally:
        _local.deadline = outer


def _cap(timeout: float | None, kind: type[Exception]) -> float | None:
    at: float | None = getattr(_local, "deadline", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise kind("the call's timeout ran out")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    """A stream whose every wait is capped by the thread's deadline, and which the thread's
    cancellation scope can shut while it blocks."""

    __slots__ = ("_inner",)

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def _blocking(self, kind: type[Exception], op: Callable[..., T], *args: Any) -> T:
        scope = cancel.current()
        if scope is None:
            return op(*args)
        try:
            scope.enter(self)
        except cancel.Cancelled:
            raise kind("the call was cancelled") from None
        try:
            return op(*args)
        finally:
            scope.leave(self)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        cap = _cap(timeout, httpcore.ReadTimeout)
        return self._blocking(httpcore.ReadError, self._inner.read, max_bytes, cap)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        cap = _cap(timeout, httpcore.WriteTimeout)
        self._blocking(httpcore.WriteError, self._inner.write, buffer, cap)

    def abort(self) -> None:
        """Shut the socket: closing a descriptor does not wake a thread blocked on it."""
        sock = self._inner.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        cap = _cap(timeout, httpcore.ConnectTimeout)
        start = self._inner.start_tls
        return _Stream(
            self._blocking(httpcore.ConnectError, start, ssl_context, server_hostname, cap)
        )

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        cancel.check(httpcore.ConnectError)
        capped = _cap(timeout, httpcore.ConnectTimeout)
        stream = _Stream(self._inner.connect_tcp(host, port, capped, local_address, socket_options))
        try:  # cancelled while connecting: the new connection is not used
            cancel.check(httpcore.ConnectError)
        except httpcore.ConnectError:
            stream.close()
            raise
        return stream


_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.ProxyError,
    httpcore.UnsupportedProtocol,
)


def _httpx_error(exc: Exception) -> httpx.TransportError:
    """httpcore's exception as httpx's class of the same name."""
    for cls in type(exc).__mro__:
        mirror = getattr(httpx, cls.__name__, None)
        if isinstance(mirror, type) and issubclass(mirror, httpx.TransportError):
            return mirror(str(exc))
    return httpx.TransportError(str(exc))  # pragma: no cover (every httpcore error is mirrored)


class _Body(httpx.SyncByteStream):
    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._stream
        except _ERRORS as exc:
            raise _httpx_error(exc) from exc

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


def _via(proxy: httpx.Proxy, context: ssl.SSLContext, **pool: Any) -> httpcore.ConnectionPool:
    """httpcore's pool through ``proxy`` (HTTP or SOCKS), trusting ``context`` unless the proxy
    brings its own."""
    url = proxy.url
    where = httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=b"/")
    if url.scheme.startswith("socks"):
        return httpcore.SOCKSProxy(
            proxy_url=where, proxy_auth=proxy.raw_auth, ssl_context=context, **pool
        )
    return httpcore.HTTPProxy(
        proxy_url=where,
        proxy_auth=proxy.raw_auth,
        proxy_headers=proxy.headers.raw,
        ssl_context=context,
        proxy_ssl_context=(proxy.ssl_context or context) if url.scheme == "https" else None,
        **pool,
    )


class Connections(httpx.BaseTransport):
    """HTTP/1.1 connections whose every socket wait respects the thread's :func:`deadline`,
    direct or through the proxy ``network`` routes each request to (default: the environment's);
    at most ``max_connections`` on each route."""

    def __init__(
        self,
        max_connections: int = 10,
        *,
        network: Network | None = None,
        keepalive_expiry: float = 5.0,
    ) -> None:
        self._network = Network() if network is None else network
        context = self._network.ssl_context()
        pool: dict[str, Any] = {
            "max_connections": max_connections,
            "max_keepalive_connections": max_connections,
            "keepalive_expiry": keepalive_expiry,
            "network_backend": _Backend(),
        }
        self._pool = httpcore.ConnectionPool(ssl_context=context, **pool)
        self._proxied = {
            name: _via(proxy, context, **pool) for name, proxy in self._network.proxies.items()
        }

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.SyncByteStream)
        url = request.url
        pool = self._pool
        if self._proxied and (route := self._network.route(url)) is not None:
            pool = self._proxied[route]
        inner = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = pool.handle_request(inner)
        except _ERRORS as exc:
            raise _httpx_error(exc) from exc
        assert isinstance(response.stream, Iterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()
        for pool in self._proxied.values():
            pool.close()


class _Counted(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, load: list[int], index: int) -> None:
        self._stream, self._load, self._index = stream, load, index

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            if self._index >= 0:
                self._load[self._index] -= 1
                self._index = -1


class _Shards:
    """One route's small pools, and the requests in progress on each."""

    def __init__(self, pools: list[httpx.AsyncHTTPTransport]) -> None:
        self.pools = pools
        self.load = [0] * len(pools)


class AsyncShards(httpx.AsyncBaseTransport):
    """Async connections in many small ``httpx.AsyncHTTPTransport`` pools, each request on the
    least busy pool of its route. httpcore re-examines every connection of a pool as each request
    starts or ends: with 50 in flight, one pool of 50 costs about four times the CPU of pools of
    two (``benchmarks/bench_client.py``). ``max_connections`` is per route, over all its pools."""

    def __init__(
        self, max_connections: int = 10, per_pool: int = 2, *, network: Network | None = None
    ) -> None:
        self._network = Network() if network is None else network
        context = self._network.ssl_context()
        count = math.ceil(max_connections / per_pool)
        size = math.ceil(max_connections / count)
        limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)

        def shards(proxy: httpx.Proxy | None = None) -> _Shards:
            if proxy is not None and proxy.url.scheme == "https" and proxy.ssl_context is None:
                proxy = httpx.Proxy(  # trusted as the sync pools trust it
                    proxy.url, auth=proxy.auth, headers=proxy.headers, ssl_context=context
                )
            return _Shards(
                [
                    httpx.AsyncHTTPTransport(limits=limits, verify=context, proxy=proxy)
                    for _ in range(count)
                ]
            )

        self._direct = shards()
        self._proxied = {name: shards(p) for name, p in self._network.proxies.items()}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        group = self._direct
        if self._proxied and (route := self._network.route(request.url)) is not None:
            group = self._proxied[route]
        load = group.load
        index = load.index(min(load))
        load[index] += 1
        try:
            response = await group.pools[index].handle_async_request(request)
        except BaseException:
            load[index] -= 1
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_Counted(response.stream, load, index),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        for group in (self._direct, *self._proxied.values()):
            for pool in group.pools:
                await pool.aclose()
