"""Start the project's local server as a real subprocess, and drive its development fault switch."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import httpx

TEST_API_KEY = "test-key-0123456789"

# What the tests send by hand: each request on a fresh connection, closed after, as
# ``httpx.post`` does, but without building a client (and loading the CA bundle, tens of
# milliseconds) per call. No connection is kept, so none counts against a server's limits.
HTTP = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), timeout=5.0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class ServerProcess:
    """``python -m composo serve`` on a free loopback port.

    ``dev_faults=True`` passes ``--dev-faults``, which enables ``/_dev/*`` on the server so tests
    can queue failures and read the bodies it received.
    """

    def __init__(
        self,
        *,
        api_keys: Sequence[str] = (TEST_API_KEY,),
        dev_faults: bool = True,
        db: Path | None = None,
        latency: float = 0.0,
        extra_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.api_key = api_keys[0] if api_keys else "any-key"
        args = [
            sys.executable,
            "-m",
            "composo",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        for key in api_keys:
            args += ["--api-key", key]
        if dev_faults:
            args.append("--dev-faults")
        if db is not None:
            args += ["--db", str(db)]
        if latency:
            args += ["--latency", str(latency)]
        args += list(extra_args)
        self.args = args
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: IO[bytes] | None = None

    def start(self, wait: float = 30.0) -> ServerProcess:
        return self.launch().ready(wait)

    def launch(self) -> ServerProcess:
        """Start the process without waiting for it (``ready`` waits): several servers a test
        needs at once start side by side."""
        # A file, not a pipe: nobody reads the access log while tests run, and a full pipe
        # would stall the server.
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(
            self.args, env=self.env, stdout=self.log, stderr=subprocess.STDOUT
        )
        return self

    def ready(self, wait: float = 30.0) -> ServerProcess:
        """Wait until the launched server answers its healthcheck."""
        assert self.proc is not None, "launch() first"
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.output()}")
            if self.healthy():
                return self
            time.sleep(0.01)
        self.stop()
        raise RuntimeError("server did not become healthy in time")

    def healthy(self) -> bool:
        """Whether the server answers its healthcheck with 200 now. A plain ``http.client``
        connection: polled every hundredth of a second while the server starts, it costs next to
        nothing (an ``httpx`` client per poll would load the CA bundle each time)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=0.5)
        try:
            conn.request("GET", "/api/healthcheck")
            return conn.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()

    def stop(self, kill: bool = False) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            if kill:
                self.proc.kill()
            else:
                self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def output(self) -> str:
        """What the server printed so far."""
        if self.log is None:
            return ""
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def close(self) -> None:
        """Stop the server and discard its log."""
        self.stop()
        if self.log is not None:
            self.log.close()
            self.log = None

    def __enter__(self) -> ServerProcess:
        return self.ready() if self.proc is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- development switch (only with dev_faults=True) ----------------------------------------

    def _dev(self, method: str, path: str, json: Any = None) -> Any:
        r = HTTP.request(
            method,
            self.base_url + "/_dev/" + path,
            json=json,
            headers={"API-Key": self.api_key},
            timeout=5,
        )
        r.raise_for_status()
        return r.json()

    def fault(self, *faults: dict[str, Any]) -> None:
        """Queue faults for the next evaluation requests, in order. Each is a dict with any of
        ``status`` (int), ``retry_after`` (str), ``delay`` (seconds), ``drop`` (close the
        connection without answering), ``detail`` (str), ``path`` (only requests whose path
        contains this string consume it)."""
        self._dev("POST", "faults", {"faults": list(faults)})

    def reset(self) -> None:
        """Clear queued faults and the recorded requests."""
        self._dev("DELETE", "faults")

    def requests(self) -> list[dict[str, Any]]:
        """Requests received since the last reset: ``{"method", "path", "headers", "body"}``
        (``headers`` never includes the API key)."""
        out: list[dict[str, Any]] = self._dev("GET", "requests")
        return out
