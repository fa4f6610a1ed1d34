"""A tiny HTTP server on loopback whose every answer is scripted byte by byte, for what the local
server cannot do on purpose: drip-feed a status line, send a compressed bomb, lose an answer
after reading the request."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Loopback", "Seen", "answer", "drip"]


@dataclass
class Seen:
    """One request as it arrived: the request line, the headers (lower-cased) and the body."""

    line: str
    headers: dict[str, str]
    body: bytes
    number: int = 0

    @property
    def path(self) -> str:
        return self.line.split(" ")[1]

    def json(self) -> Any:
        return json.loads(self.body)


Handler = Callable[[socket.socket, Seen], None]


def answer(
    sock: socket.socket,
    body: bytes | dict[str, Any],
    status: str = "200 OK",
    headers: dict[str, str] | None = None,
) -> None:
    """A whole answer at once (the connection closes after it)."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    head = {"Content-Type": "application/json", "Content-Length": str(len(data))}
    head.update(headers or {})
    lines = "".join(f"{k}: {v}\r\n" for k, v in head.items())
    sock.sendall(f"HTTP/1.1 {status}\r\n{lines}Connection: close\r\n\r\n".encode() + data)


def drip(sock: socket.socket, data: bytes, every: float, stop: threading.Event) -> None:
    """``data`` one byte at a time, ``every`` seconds apart, until done or told to stop."""
    for i in range(len(data)):
        if stop.is_set():
            return
        try:
            sock.sendall(data[i : i + 1])
        except OSError:
            return  # the client hung up
        stop.wait(every)


@dataclass
class Loopback:
    """``handler(sock, seen)`` answers each request (one per connection) on its own thread."""

    handler: Handler
    seen: list[Seen] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def __enter__(self) -> Loopback:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        with contextlib.suppress(OSError):  # wake the accepting thread
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        self._server.close()
        for thread in self._threads:
            thread.join(5)

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                sock, _ = self._server.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, sock: socket.socket) -> None:
        with sock:
            sock.settimeout(10)
            try:
                seen = self._read(sock)
            except OSError:
                return
            if seen is None:
                return
            with self._lock:
                seen.number = len(self.seen)
                self.seen.append(seen)
            with contextlib.suppress(OSError):  # the client gave up first, as it often should
                self.handler(sock, seen)

    @staticmethod
    def _read(sock: socket.socket) -> Seen | None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        line, *rest = head.decode("latin-1").split("\r\n")
        headers = {}
        for raw in rest:
            name, _, value = raw.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        return Seen(line, headers, body)


def wait_until(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return check()
