"""Connection limits that an ASGI application cannot see: uvicorn's HTTP/1.1 protocol (the
httptools parser) with a size limit and a deadline for each request head, a deadline for a body
that stops arriving, and a cap on open connections.

uvicorn itself closes idle keep-alive connections (``timeout_keep_alive``) and stops reading a
body the application is not reading (flow control at 64 KiB). It does not bound a request head
(the parser would hold any size), time out a connection that opens and sends nothing, sends part
of a head, or stops sending a body it announced; nor does it refuse connections past a number
(its ``limit_concurrency`` answers 503 to their requests but keeps them open). Those are here, as
counters and timers on the connection: cheaper than a timeout around every read in the
application. What a body may hold is the gate's (:mod:`composo.server._gate`).

A connection closed while its request is still arriving (answered 401, 413 or 431 before the
body was read, to a client that asked for ``Connection: close`` or was told it) is half-closed
first: the answer goes out followed by the end of the stream, and what the client still sends is
read and discarded, up to what it declared (and ``drain_bytes``) and for ``DRAIN_SECONDS`` at
most. Closing a socket with unread data makes the system answer with a reset, which throws away
the answer before a client that sends its whole body first has read it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from composo.server._bodies import dumps

__all__ = ["DRAIN_SECONDS", "MAX_HEAD_BYTES", "guarded_protocol"]

# A request head (request line and headers) may hold this much; ours are well under 1 KiB.
MAX_HEAD_BYTES = 16 * 1024
# How long a half-closed connection goes on discarding what its client still sends.
DRAIN_SECONDS = 2.0
# Beyond what a client declared, what a half-closed connection discards before it closes.
_DRAIN_SLACK = 64 * 1024


def _raw_answer(status: int, reason: str, detail: str) -> bytes:
    body = dumps({"detail": detail})
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


class _HeadTooLarge(Exception):
    """Raised from a parser callback: stops the parser at the first byte over the limit."""


class _GentleTransport(asyncio.Transport):
    """The connection's transport as uvicorn and the protocol see it: the real one, except that
    ``close`` asks the protocol first (which may half-close and drain instead)."""

    def __init__(self, real: asyncio.Transport, close: Callable[[], None]) -> None:
        super().__init__()
        self.real = real
        self.draining = False
        self._close = close

    def close(self) -> None:
        self._close()

    def is_closing(self) -> bool:
        return self.draining or self.real.is_closing()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self.draining:
            self.real.write(data)

    def abort(self) -> None:
        self.real.abort()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.real.get_extra_info(name, default)

    def is_reading(self) -> bool:
        return self.real.is_reading()

    def pause_reading(self) -> None:
        if not self.draining:
            self.real.pause_reading()

    def resume_reading(self) -> None:
        self.real.resume_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.real.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self.real.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.real.get_write_buffer_limits()

    def write_eof(self) -> None:
        self.real.write_eof()

    def can_write_eof(self) -> bool:
        return self.real.can_write_eof()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.real.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.real.get_protocol()


class _GuardedProtocol(HttpToolsProtocol):
    read_timeout: float = 10.0
    max_connections: int = 1000
    max_head_bytes: int = MAX_HEAD_BYTES
    drain_bytes: int = 40 * 1024 * 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_seen = 0.0
        self._in_message = False  # from a request's first byte to the end of its body
        self._in_head = False  # from a request's first byte to the end of its head
        self._head_size = 0  # what the parser has handed over of the open head
        self._head_reads = 0  # whole reads since then while the head stayed open
        self._too_large = False
        self._declared: int | None = None  # the open request's Content-Length
        self._body_bytes = 0  # what has arrived of its body
        self._gentle: _GentleTransport | None = None
        self._drain_timer: asyncio.TimerHandle | None = None
        self._drain_left = 0
        self._stopping = False

    # Connection events

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.server_state.connections) >= self.max_connections:
            # Refuse before reading anything: a held connection is memory.
            transport.write(
                _raw_answer(
                    503,
                    "Service Unavailable",
                    f"this server already holds {self.max_connections} connections "
                    "(its --max-connections); retry shortly",
                )
            )
            transport.close()
            return
        self._gentle = _GentleTransport(transport, self._close)
        super().connection_made(self._gentle)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._gentle is not None and self._gentle.draining:
            self._drain_left -= len(data)
            if self._drain_left < 0:
                self._close_now()  # more than it declared: no answer is owed to the rest
            return
        if self._awaiting_head():
            self._arm()  # the next head (and the end of any body left unread) must come in time
        cycle = self.cycle
        open_before = self._in_head
        super().data_received(data)
        if self.transport.is_closing():
            return
        if self.cycle is not cycle:
            self._disarm()  # a complete head arrived
        if self._in_head and open_before:
            # Bytes the parser may be holding for a header line it has not finished.
            self._head_reads += len(data)
            if self._head_reads > self.max_head_bytes:
                self._refuse_head()
                return
        self._watch_body()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._drain_timer is not None:
            self._drain_timer.cancel()
            self._drain_timer = None
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        if self.transport is None:
            return  # refused in connection_made: nothing was set up
        super().connection_lost(exc)

    # Parser callbacks: how much of the head has arrived

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_message = self._in_head = True
        self._head_size = self._head_reads = 0
        self._declared = None
        self._body_bytes = 0

    def _count(self, size: int) -> None:
        self._head_size += size
        if self._head_size > self.max_head_bytes:
            self._too_large = True
            raise _HeadTooLarge

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        if name.lower() == b"content-length" and value.strip().isdigit():
            self._declared = int(value)
        super().on_header(name, value)

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_message = False
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        if self._too_large:
            self._refuse_head()
            return
        super().send_400_response(msg)

    def _refuse_head(self) -> None:
        self.transport.write(
            _raw_answer(
                431,
                "Request Header Fields Too Large",
                f"the request head is over this server's limit of {self.max_head_bytes} bytes; "
                "send fewer or shorter headers",
            )
        )
        self.transport.close()

    # Closing: half-close and drain while a request is still arriving

    def _close(self) -> None:
        """What closing the connection does (uvicorn's and this class's calls alike)."""
        gentle = self._gentle
        assert gentle is not None
        real = gentle.real
        if gentle.draining or real.is_closing():
            return
        if not self._in_message or self._stopping or not real.can_write_eof():
            real.close()
            return
        if self._declared is None:  # chunked, or the head itself is still arriving
            left = self.drain_bytes
        else:
            left = self._declared - self._body_bytes + _DRAIN_SLACK
            if left > self.drain_bytes:
                real.close()  # declared far over the limit: not worth reading
                return
        self._drain_left = left
        gentle.draining = True
        real.write_eof()  # the answer, then the end of the stream
        if not real.is_reading():
            real.resume_reading()
        self._drain_timer = self.loop.call_later(
            min(DRAIN_SECONDS, self.read_timeout), self._close_now
        )

    def _close_now(self) -> None:
        if self._gentle is not None:
            self._gentle.real.close()

    def shutdown(self) -> None:
        self._stopping = True  # the server is stopping: no draining
        if self._gentle is not None and self._gentle.draining:
            self._close_now()
            return
        super().shutdown()

    # The head's deadline

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.read_timeout, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _awaiting_head(self) -> bool:
        return self.cycle is None or bool(self.cycle.response_complete)

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self._in_head or not self._in_message:
            # No answer is owed to anything else on this connection: say why it closes.
            self.transport.write(
                _raw_answer(
                    408,
                    "Request Timeout",
                    f"the request did not arrive within {self.read_timeout:g}s; closing",
                )
            )
        self._close_now()  # nothing is arriving: nothing to drain

    # The body's deadline

    def _receiving_body(self) -> bool:
        cycle = self.cycle
        return (
            cycle is not None
            and bool(cycle.more_body)
            and not cycle.response_started
            and not cycle.disconnected
        )

    def _watch_body(self) -> None:
        """While a body is still coming, it must keep coming."""
        if not self._receiving_body():
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None
            return
        self._body_seen = self.loop.time()
        if self._body_timer is None:
            self._body_timer = self.loop.call_later(self.read_timeout, self._body_check)

    def _body_check(self) -> None:
        self._body_timer = None
        if not self._receiving_body() or self.transport.is_closing():
            return
        quiet = self.loop.time() - self._body_seen
        if quiet < self.read_timeout or self.flow.read_paused:
            # Progress since, or the server itself is not reading yet: look again later.
            wait = max(self.read_timeout - quiet, 0.05)
            self._body_timer = self.loop.call_later(wait, self._body_check)
            return
        self.transport.write(
            _raw_answer(
                408,
                "Request Timeout",
                f"the request body stopped arriving for {self.read_timeout:g}s; closing",
            )
        )
        self.cycle.disconnected = True  # the application's reads end, its answer is dropped
        self.cycle.message_event.set()
        self._close_now()

    def on_response_complete(self) -> None:
        cycle = self.cycle
        if cycle is not None and cycle.more_body:
            cycle.body = bytearray()  # a body answered before it was read is not kept
        super().on_response_complete()
        if self.cycle is not cycle:
            self._disarm()  # a pipelined request started


def guarded_protocol(
    read_timeout: float, max_connections: int, drain_bytes: int = 40 * 1024 * 1024
) -> type[asyncio.Protocol]:
    """The protocol class uvicorn is given (``Config(http=...)``) for these limits;
    ``drain_bytes``: the most a connection closed before its body was read discards."""
    return type(
        "GuardedHttpProtocol",
        (_GuardedProtocol,),
        {
            "read_timeout": read_timeout,
            "max_connections": max_connections,
            "drain_bytes": drain_bytes,
        },
    )
