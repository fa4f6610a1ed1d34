"""Everything a server instance is configured with, in one frozen object."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024  # 10 MiB
# Connections and requests in hand at once; past it uvicorn's limit_concurrency answers 503.
DEFAULT_MAX_CONNECTIONS = 1000
# What uvicorn's parser buffers of a request head that has not ended (ours are under 1 KiB).
MAX_HEAD_BYTES = 16 * 1024
DEFAULT_TASK_LEASE = 30.0  # seconds a stopped server's tasks stay with it
DEFAULT_HISTORY_DAYS = 30.0  # days the evaluation history is kept (0: none is kept)
DEFAULT_HISTORY_ROWS = 100_000  # evaluations (and traces) the history holds at most


@dataclass(frozen=True)
class JudgeOptions:
    """What a judge factory is given; each judge reads the fields it needs."""

    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    timeout: float = 60.0
    max_attempts: int = 3


class SpanSink(Protocol):
    """Where received spans go: groups them, says which traces are done (converted)."""

    idle_seconds: float

    def ingest(self, data: bytes, content_type: str) -> int: ...

    def finished(self) -> list[Any]: ...


@dataclass(frozen=True)
class OtlpOptions:
    """The OTLP receiver: ``sink()`` makes each server its own; ``results=None``: no results file"""

    sink: Callable[[], SpanSink]
    criteria: tuple[str, ...]
    results: Path | None = None


@dataclass(frozen=True)
class ServerConfig:
    """Settings of one server; ``db=None`` keeps tasks in memory."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    judge: str = "heuristic"
    judge_options: JudgeOptions = field(default_factory=JudgeOptions)
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    db: Path | None = None
    rate_limit_per_minute: float | None = None
    rate_limit_burst: int | None = None  # requests the bucket holds (default: a minute's)
    dev_faults: bool = False
    latency: float = 0.0
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_background: int = 32
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    task_lease_seconds: float = DEFAULT_TASK_LEASE
    history_days: float = DEFAULT_HISTORY_DAYS
    history_max_rows: int = DEFAULT_HISTORY_ROWS
    otlp: OtlpOptions | None = None  # None: no /v1/traces routes

    def __post_init__(self) -> None:
        if not self.api_keys and not is_loopback(self.host):
            raise ValueError(
                f"host {self.host!r} is not a loopback address: refusing to serve without an API "
                "key; pass --api-key KEY (or set COMPOSO_SERVER_API_KEYS) or bind 127.0.0.1"
            )
        if any(not k for k in self.api_keys):
            raise ValueError("api_keys: an API key cannot be empty")
        for name, least in _LEAST.items():
            value = getattr(self, name)
            if value is not None and value < least:
                raise ValueError(f"{name}: must be at least {least}, got {value}")
        if self.rate_limit_per_minute is not None and self.rate_limit_per_minute <= 0:
            raise ValueError(
                f"rate_limit: must be a positive number a minute, got {self.rate_limit_per_minute}"
            )


_LEAST = {
    "latency": 0,
    "max_body_bytes": 1024,
    "max_connections": 1,
    "task_lease_seconds": 1,
    "history_days": 0,
    "history_max_rows": 1,
    "rate_limit_burst": 1,
}


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def default_db_path() -> Path:
    """Where the command line keeps background tasks: the user's cache directory."""
    try:
        import platformdirs
    except ImportError as exc:  # pragma: no cover - platformdirs ships with the server extra
        raise ImportError(
            "the local server needs platformdirs: pip install 'composo[server]'"
        ) from exc
    return Path(platformdirs.user_cache_dir("composo")) / "server-tasks.sqlite3"
