"""The call's deadline at the socket: every read and write of the sync client's own connections
waits at most until the deadline of the call running on that thread.

``httpx.Timeout`` bounds each socket operation on its own, so a server that sends one byte every
half second (in the status line, the headers or the body) could hold a call forever. The sync
client sets its call's deadline here around each attempt; the streams of its connection pool cap
every timeout at what is left of it. (The async client bounds an attempt with
``asyncio.timeout`` instead, which needs no help from the transport.)

The same streams hold a request's writes until its answer is read, so the head and a small body
leave in one packet.
"""

from __future__ import annotations

import threading
import time
import typing

import httpcore
import httpx

from composo._core.coalesce import HeldWrites

__all__ = ["DeadlineBackend", "clear", "install", "set_deadline"]

_local = threading.local()


def set_deadline(deadline: float) -> None:
    """The ``time.monotonic()`` by which this thread's current call must be done."""
    _local.deadline = deadline


def clear() -> None:
    _local.deadline = None


def _cap(timeout: float | None, kind: type[Exception]) -> float | None:
    deadline: float | None = getattr(_local, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise kind("the call's timeout ran out")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    __slots__ = ("_held", "_inner")

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner
        self._held = HeldWrites()

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if pending := self._held.take():
            self._inner.write(pending, _cap(timeout, httpcore.WriteTimeout))
        return self._inner.read(max_bytes, _cap(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if now := self._held.add(buffer):
            self._inner.write(now, _cap(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._held.take()
        self._inner.close()

    def start_tls(
        self,
        ssl_context: typing.Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        tls = self._inner.start_tls(
            ssl_context, server_hostname, _cap(timeout, httpcore.ConnectTimeout)
        )
        return _Stream(tls)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """A network backend whose streams respect the thread's call deadline."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    # Only the connect timeout is capped; everything else passes through as httpcore sent it.

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        *args: typing.Any,
        **kwargs: typing.Any,
    ) -> httpcore.NetworkStream:
        capped = _cap(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.connect_tcp(host, port, capped, *args, **kwargs))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, *args: typing.Any, **kwargs: typing.Any
    ) -> httpcore.NetworkStream:  # pragma: no cover (the client speaks TCP)
        capped = _cap(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.connect_unix_socket(path, capped, *args, **kwargs))

    def sleep(self, seconds: float) -> None:  # pragma: no cover (retries are httpx's, off)
        self._inner.sleep(seconds)


def install(transport: httpx.HTTPTransport) -> bool:
    """Put the deadline under ``transport``'s connection pool; ``False`` if its pool is not the
    one httpx builds (then each read is bounded by the attempt's timeout only)."""
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if not isinstance(pool, httpcore.ConnectionPool) or backend is None:
        return False
    if not isinstance(backend, DeadlineBackend):
        pool._network_backend = DeadlineBackend(backend)
    return True
