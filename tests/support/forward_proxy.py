"""A loopback forward proxy and a TLS terminator, for the tests of the clients' proxy settings.

:class:`ForwardProxy` is what a user's network puts between them and the platform: it forwards
plain HTTP requests (absolute-form targets) and tunnels ``CONNECT``, resolving only the names it
is given (a ``.test`` name resolves nowhere else, so a request that arrives went through it), and
records every request line. It can stall instead: read the request and never answer
(``"silent"``), or answer one byte every 0.1 s (``"drip"``, which no per-read timeout ends).
(The counting proxy beside it is a reverse proxy in front of one server, for budgets; this one
is the other kind.) :class:`Socks5Proxy` does the same for SOCKS5 (no authentication, CONNECT
only). :class:`TlsTerminator` puts https with a CA of the test's own in front of the plain-HTTP
local server.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import socket
import socketserver
import ssl
import struct
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import urlsplit

from tests.support.serving import InThread

Stall = Literal["silent", "drip"]
_HOP = {
    "connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes one way until either side closes."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


class ForwardProxy:
    """A forward proxy on loopback for the names in ``hosts`` (name -> ``(ip, port)``).

    Attributes:
        url: Its address, for ``HTTP_PROXY`` or ``proxy=``.
        seen: Each request line it received (``"POST http://name/path"``, ``"CONNECT name:443"``).
        auth: Each ``Proxy-Authorization`` header it received.
    """

    def __init__(
        self,
        hosts: Mapping[str, tuple[str, int]],
        *,
        stall: Literal["silent", "drip"] | None = None,
    ) -> None:
        self.hosts = dict(hosts)
        self.stall = stall
        self.seen: list[str] = []
        self.auth: list[str] = []
        self._released = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _record(self) -> bool:
                """Note the request; ``False`` when it is held until the proxy closes."""
                proxy.seen.append(f"{self.command} {self.path}")
                if "Proxy-Authorization" in self.headers:
                    proxy.auth.append(self.headers["Proxy-Authorization"])
                if proxy.stall is None:
                    return True
                if proxy.stall == "drip":  # a CONNECT answer that takes over 20 s to arrive
                    head = b"HTTP/1.1 200 Connection established\r\nX-Slow: " + b"a" * 200
                    for byte in head:
                        if proxy._released.wait(0.1):
                            break
                        try:
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                        except OSError:
                            break
                proxy._released.wait(60)
                self.close_connection = True
                return False

            def _where(self, host: str) -> tuple[str, int] | None:
                where = proxy.hosts.get(host.lower())
                if where is None:
                    self.send_error(502, f"unknown host {host}")
                return where

            def do_CONNECT(self) -> None:
                if not self._record():
                    return
                where = self._where(self.path.rsplit(":", 1)[0])
                if where is None:
                    return
                upstream = socket.create_connection(where, timeout=30)
                self.send_response(200, "Connection established")
                self.end_headers()
                self.wfile.flush()
                back = threading.Thread(target=_pipe, args=(upstream, self.connection), daemon=True)
                back.start()
                _pipe(self.connection, upstream)
                back.join(30)
                upstream.close()
                self.close_connection = True

            def _forward(self) -> None:
                if not self._record():
                    return
                target = urlsplit(self.path)
                where = self._where(target.hostname or "")
                if where is None:
                    return
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                upstream = http.client.HTTPConnection(*where, timeout=30)
                try:
                    path = target.path + (f"?{target.query}" if target.query else "")
                    upstream.request(self.command, path or "/", body=body, headers=headers)
                    answer = upstream.getresponse()
                    content = answer.read()
                    self.send_response(answer.status)
                    for k, v in answer.getheaders():
                        if k.lower() not in _HOP and k.lower() != "content-length":
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(content)))
                    self.end_headers()
                    self.wfile.write(content)
                finally:
                    upstream.close()

            do_GET = do_POST = do_DELETE = do_PUT = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._serving = InThread(self._server)

    def __enter__(self) -> ForwardProxy:
        self._serving.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        self._serving.stop()


class Socks5Proxy:
    """A SOCKS5 proxy on loopback for the names in ``hosts``; ``seen``: ``"CONNECT name:port"``."""

    def __init__(self, hosts: Mapping[str, tuple[str, int]]) -> None:
        self.hosts = dict(hosts)
        self.seen: list[str] = []
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def _read(self, size: int) -> bytes:
                data = b""
                while len(data) < size and (chunk := self.request.recv(size - len(data))):
                    data += chunk
                return data

            def handle(self) -> None:
                version, methods = self._read(2)
                self._read(methods)
                self.request.sendall(b"\x05\x00")  # no authentication
                version, command, _, kind = self._read(4)
                if kind == 3:  # a name
                    host = self._read(self._read(1)[0]).decode()
                else:  # an address (4 or 16 bytes)
                    host = socket.inet_ntop(
                        socket.AF_INET if kind == 1 else socket.AF_INET6,
                        self._read(4 if kind == 1 else 16),
                    )
                (port,) = struct.unpack("!H", self._read(2))
                proxy.seen.append(f"CONNECT {host}:{port}")
                where = proxy.hosts.get(host.lower())
                if version != 5 or command != 1 or where is None:
                    self.request.sendall(b"\x05\x04\x00\x01" + bytes(6))  # host unreachable
                    return
                upstream = socket.create_connection(where, timeout=30)
                self.request.sendall(b"\x05\x00\x00\x01" + bytes(6))
                back = threading.Thread(target=_pipe, args=(upstream, self.request), daemon=True)
                back.start()
                _pipe(self.request, upstream)
                back.join(30)
                upstream.close()

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"socks5://127.0.0.1:{self._server.server_address[1]}"
        self._serving = InThread(self._server)

    def __enter__(self) -> Socks5Proxy:
        self._serving.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.stop()


class TlsTerminator:
    """https on loopback with ``context``'s certificate, each connection passed on as plain TCP
    to ``127.0.0.1:port`` (an event loop in a thread of its own)."""

    def __init__(self, port: int, context: ssl.SSLContext) -> None:
        self._target = port
        self._loop = asyncio.new_event_loop()
        # A client that refuses the certificate ends the handshake: expected, not worth a log.
        self._loop.set_exception_handler(lambda loop, ctx: None)
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        start = asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=context)
        self._server = asyncio.run_coroutine_threadsafe(start, self._loop).result(10)
        self.port: int = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, ssl.SSLError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def __enter__(self) -> TlsTerminator:
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            self._server.close()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
