"""Run the server in the foreground (``composo serve``) or in a background thread."""

from __future__ import annotations

import errno
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from composo.server._config import MAX_HEAD_BYTES, JudgeOptions, ServerConfig
from composo.server._received import Received, ReceivedLog


def require_server_extra() -> None:
    """Fail with the install hint when FastAPI or uvicorn is missing."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"the local Composo server needs FastAPI and uvicorn ({exc.name} is missing): "
            "pip install 'composo[server]'"
        ) from exc


def _uvicorn(config: ServerConfig, received: ReceivedLog | None, access_log: bool) -> Any:
    """uvicorn on documented settings only: h11 bounds an unfinished head, idle keep-alive
    connections close after 5 s, ``limit_concurrency`` answers 503 past it; no route is a
    WebSocket, so no WebSocket protocol is loaded."""
    require_server_extra()
    import uvicorn

    from composo.server._app import build_app
    from composo.server._redact import install_log_redaction

    made = uvicorn.Config(
        build_app(config, received),
        host=config.host,
        port=config.port,
        http="h11",
        ws="none",
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        limit_concurrency=config.max_connections,
        timeout_keep_alive=5,
        log_level="info" if access_log else "warning",
        access_log=access_log,
        lifespan="on",
        server_header=False,
        timeout_graceful_shutdown=5,
    )
    # After uvicorn has set up its loggers: no credential reaches a log line.
    install_log_redaction(config.api_keys)
    return uvicorn.Server(made)


def serve_forever(
    config: ServerConfig, access_log: bool = True, on_ready: Callable[[], None] | None = None
) -> None:
    """Serve until SIGINT/SIGTERM; ``on_ready`` runs once set up, just before serving."""
    server = _uvicorn(config, None, access_log)
    with listening_socket(config.host, config.port) as sock:
        if on_ready is not None:
            on_ready()
        server.run(sockets=[sock])


def listening_socket(host: str, port: int) -> socket.socket:
    """Bound here so a port in use is one clear ``ValueError``. ``IPPROTO_TCP``: asyncio turns
    Nagle off only on sockets that say they are TCP (else each keep-alive answer waits ~40 ms)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ValueError(
                f"port {port} on {host} is already in use (another server?); stop it or pick "
                "another with --port"
            ) from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise ValueError(f"--host {host}: not an address of this machine") from None
        raise ValueError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


class LocalServer:
    """The server on a free port (``port=0``) in a background thread: ``with LocalServer() as
    srv:``, then point a client at ``srv.base_url`` with ``srv.api_key`` (without ``api_keys``
    any key is accepted and ``api_key`` is a random one)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        judge: str = "heuristic",
        api_keys: Sequence[str] = (),
        db: str | Path | None = None,
        latency: float = 0.0,
        dev_faults: bool = False,
        *,
        judge_options: JudgeOptions | None = None,
        rate_limit_per_minute: float | None = None,
        max_body_bytes: int | None = None,
        max_connections: int | None = None,
        task_lease_seconds: float | None = None,
        record_requests: bool | int = False,
    ) -> None:
        """``record_requests``: keep the last 1000 (or that many) requests in :attr:`requests`."""
        if isinstance(record_requests, bool):
            keep = 1000 if record_requests else 0
        elif isinstance(record_requests, int) and record_requests > 0:
            keep = record_requests
        else:
            raise ValueError(
                f"record_requests: expected True, False or a positive number of requests to "
                f"keep, got {record_requests!r}"
            )
        self._received = ReceivedLog(keep) if keep else None
        limits = {
            "max_body_bytes": max_body_bytes,
            "max_connections": max_connections,
            "task_lease_seconds": task_lease_seconds,
        }
        self.config = ServerConfig(
            host=host,
            port=port,
            judge=judge,
            judge_options=judge_options or JudgeOptions(),
            api_keys=tuple(api_keys),
            db=None if db is None else Path(db),
            rate_limit_per_minute=rate_limit_per_minute,
            dev_faults=dev_faults,
            latency=latency,
            **{k: v for k, v in limits.items() if v is not None},  # type: ignore[arg-type]
        )
        # Starts with letters: pasted after `--api-key`, a leading "-" would read as an option.
        generated = "local-" + secrets.token_urlsafe(16)
        self.api_key = self.config.api_keys[0] if self.config.api_keys else generated
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.port: int | None = None

    def __repr__(self) -> str:
        url = self.base_url if self.port else None
        return f"LocalServer(base_url={url!r}, judge={self.config.judge!r})"

    @property
    def requests(self) -> list[Received]:
        """The requests received so far, oldest first (the last ``record_requests`` of them)."""
        if self._received is None:
            raise RuntimeError(
                "requests are not recorded; make the server with LocalServer(record_requests=True)"
            )
        return self._received.snapshot()

    def clear_requests(self) -> None:
        """Forget the requests recorded so far."""
        if self._received is not None:
            self._received.clear()

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the server is not started; call start() or use it in a with block")
        host = self.config.host
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    def start(self, timeout: float = 30.0) -> LocalServer:
        if self._thread is not None:
            return self
        sock = self._socket = listening_socket(self.config.host, self.config.port)
        self.port = sock.getsockname()[1]
        try:
            server = self._server = _uvicorn(self.config, self._received, False)
        except BaseException:
            self._cleanup()
            raise
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="composo-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not self._thread.is_alive():
                self._cleanup()
                raise RuntimeError("the local Composo server failed to start; see the log")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the local Composo server did not start within {timeout}s")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self._server.force_exit = True
                self._thread.join(timeout)
        self._cleanup()

    def _cleanup(self) -> None:
        if self._socket is not None:
            self._socket.close()
        self._socket, self._thread, self._server = None, None, None

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
