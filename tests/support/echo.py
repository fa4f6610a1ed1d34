"""A keep-alive HTTP/1.1 server on loopback whose every verdict echoes its own request: the
explanation is the last message's content and the criterion, so an answer that reached the wrong
caller shows. It can also refuse (a scripted 429), stall (read the request, never answer) and
record when each request arrived. Threads of the process that made it serve it; a forked child
inherits only its listening socket, so the parent keeps answering the child's requests too."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.serving import InThread

__all__ = ["Arrival", "Echo", "marker"]


def marker(body: dict[str, Any]) -> str:
    """What a verdict for ``body`` must say: its last message's content and its criterion."""
    content = body["messages"][-1]["content"]
    return f"{content}|{body.get('evaluation_criteria')}"


@dataclass(frozen=True)
class Arrival:
    at: float  # time.monotonic() when the request was read
    marker: str


# (number of the request, its body) -> None: answer the verdict; (status, headers): refuse;
# "stall": never answer.
Script = Callable[[int, dict[str, Any]], "tuple[int, dict[str, str]] | str | None"]


class Echo:
    """``with Echo() as srv:`` serves on ``srv.url`` until the block ends.

    Args:
        script: Decides each request's fate (default: every request gets its verdict).
        latency: Seconds before each verdict (a refusal is sent at once).
    """

    def __init__(self, script: Script | None = None, latency: float = 0.0) -> None:
        self.script = script
        self.latency = latency
        self.arrivals: list[Arrival] = []
        self.released = threading.Event()  # set: stalled requests are let go (unanswered)
        self._lock = threading.Lock()
        echo = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                with echo._lock:
                    number = len(echo.arrivals)
                    echo.arrivals.append(Arrival(time.monotonic(), marker(body)))
                fate = echo.script(number, body) if echo.script is not None else None
                if fate == "stall":
                    echo.released.wait(60)
                    self.close_connection = True
                    return
                if isinstance(fate, tuple):  # refused at once
                    status, headers = fate
                    self._send(status, {"detail": "refused"}, headers)
                    return
                if echo.latency:
                    time.sleep(echo.latency)
                self._send(200, {"score": 1.0, "explanation": marker(body)}, {})

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 64  # many clients connect at once; the default 5 drops SYNs

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that hung up, or garbled requests: the test judges the answers

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._serving = InThread(self._server)

    def __enter__(self) -> Echo:
        self._serving.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.released.set()
        self._serving.stop(join=5)

    def after(self, start: float, seconds: float) -> list[Arrival]:
        """The requests that arrived in the ``seconds`` after ``start``."""
        with self._lock:
            return [a for a in self.arrivals if start < a.at < start + seconds]
