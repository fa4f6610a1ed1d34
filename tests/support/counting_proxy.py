"""A loopback HTTP proxy in front of the local server that counts the requests it sees in flight,
so a test can check from the server's side that a request budget held."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from tests.support.serving import InThread

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}


class CountingProxy:
    """Forwards every request to ``target``; ``peak`` is the most requests in flight at once."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.in_flight = 0
        self.peak = 0
        self.total = 0
        self._lock = threading.Lock()
        self._http = httpx.Client(limits=httpx.Limits(max_connections=200), timeout=60)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward()

            def do_POST(self) -> None:
                self._forward()

            def do_DELETE(self) -> None:
                self._forward()

            def _forward(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(size) if size else b""
                with proxy._lock:
                    proxy.in_flight += 1
                    proxy.total += 1
                    proxy.peak = max(proxy.peak, proxy.in_flight)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                    headers.pop("Host", None)
                    r = proxy._http.request(
                        self.command, proxy.target + self.path, content=body, headers=headers
                    )
                finally:
                    with proxy._lock:
                        proxy.in_flight -= 1
                self.send_response(r.status_code)
                for k, v in r.headers.items():
                    if k.lower() not in _HOP:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._serving = InThread(self._server)

    def __enter__(self) -> CountingProxy:
        self._serving.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.stop()
        self._http.close()
