"""A result cache that survives re-runs: the same request to the same server is answered from disk.

Entries are content-addressed: the key is a hash of the base URL, the path, the model core and the
canonical request body (keys sorted, no whitespace), so any change to the conversation, the
criterion or an option is a different entry, and the same request to the platform and to a
local server are two entries. Only successful answers are stored, and never for
``data_retention="none"`` (the user asked that nothing be kept). Each answer is stored with its
provenance (the ``x-composo-judge*`` headers a server named its judge with; none: the platform)
and a hit carries it again, so a cached score names the judge that made it; an entry stored
without it (by an older version) is not trusted and is asked again. The store is one SQLite file in
WAL mode, so several processes may read and write it at once.

The cache sits in the HTTP transport (:class:`CachingTransport`, :class:`AsyncCachingTransport`),
so the clients, the retry policy and the batch engines are unchanged by it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from composo._core.body import Inflater

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "EVALUATION_PATHS",
    "AsyncCachingTransport",
    "CacheInfo",
    "CacheOption",
    "CachingTransport",
    "ResultCache",
    "decoded",
    "default_cache_dir",
    "open_cache",
    "provenance",
    "read_whole",
]

CACHE_FILE = "results.sqlite3"
HIT_HEADER = "x-composo-cache"
PROVENANCE_PREFIX = "x-composo-judge"
"""Headers kept with an answer and given back on a hit: who judged it."""
EVALUATION_PATHS = ("/api/v1/evals/reward", "/api/v1/evals/trace")
_BUSY_TIMEOUT_MS = 30_000


def default_cache_dir() -> Path:
    """``COMPOSO_CACHE_DIR``, else the user's cache directory (platformdirs when installed, else
    ``XDG_CACHE_HOME`` or the platform's usual place) with a ``composo`` folder."""
    explicit = os.environ.get("COMPOSO_CACHE_DIR", "").strip()
    if explicit:
        return Path(explicit).expanduser()
    try:
        from platformdirs import user_cache_dir
    except ImportError:
        return _fallback_cache_root() / "composo"
    return Path(user_cache_dir("composo", appauthor=False))


def _fallback_cache_root() -> Path:
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


@dataclass(frozen=True)
class CacheInfo:
    """What the cache holds.

    Attributes:
        path: The SQLite file.
        entries: Stored answers.
        size_bytes: The file's size on disk.
    """

    path: Path
    entries: int
    size_bytes: int


class ResultCache:
    """Stored answers keyed by request; safe for threads of one process and for many processes.

    Args:
        path: A directory (the file ``results.sqlite3`` is made in it) or a ``.sqlite3`` /
            ``.db`` file. Default: :func:`default_cache_dir`.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        where = Path(path).expanduser() if path is not None else default_cache_dir()
        if where.suffix not in (".sqlite3", ".sqlite", ".db"):
            where = where / CACHE_FILE
        self.path = where
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            import sqlite3  # here, so that importing the client does not load it

            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(
                self.path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                check_same_thread=False,
            )  # fmt: skip
            db.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS answers ("
                "key TEXT PRIMARY KEY, body BLOB NOT NULL, stored REAL NOT NULL, headers TEXT)"
            )
            _add_headers_column(db)
            self._db = db
        return self._db

    @staticmethod
    def key(base_url: str, path: str, body: Any) -> str:
        """The content address of one request: base URL, path, model core and canonical body."""
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        model_core = body.get("model_core") if isinstance(body, dict) else None
        material = "\n".join([base_url.rstrip("/"), path, str(model_core or ""), canonical])
        return hashlib.sha256(material.encode()).hexdigest()

    def get(self, key: str) -> tuple[bytes, dict[str, str]] | None:
        """The stored answer and its provenance headers; ``None`` if there is none (or only
        one without provenance)."""
        with self._lock:
            row = (
                self._connect()
                .execute("SELECT body, headers FROM answers WHERE key=?", (key,))
                .fetchone()
            )
        if row is None or row[1] is None:
            return None
        try:
            headers = json.loads(row[1])
        except ValueError:
            return None
        if not isinstance(headers, dict):
            return None
        return bytes(row[0]), {str(k): str(v) for k, v in headers.items()}

    def put(self, key: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        """Store an answer with its provenance headers (``{}``: the platform's)."""
        kept = json.dumps(headers or {}, sort_keys=True)
        with self._lock:
            self._connect().execute(
                "INSERT OR REPLACE INTO answers (key, body, stored, headers) VALUES (?, ?, ?, ?)",
                (key, body, time.time(), kept),
            )

    def info(self) -> CacheInfo:
        """How many answers are stored and how much disk they take."""
        if not self.path.exists():
            return CacheInfo(self.path, 0, 0)
        with self._lock:
            (count,) = self._connect().execute("SELECT COUNT(*) FROM answers").fetchone()
        size = sum(
            p.stat().st_size
            for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))
            if p.exists()
        )
        return CacheInfo(self.path, int(count), size)

    def clear(self) -> int:
        """Remove every stored answer; the number removed."""
        if not self.path.exists():
            return 0
        with self._lock:
            db = self._connect()
            removed = db.execute("DELETE FROM answers").rowcount
            db.execute("VACUUM")
        return int(removed)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __getstate__(self) -> dict[str, Any]:  # a connection cannot travel to another process
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self._lock = threading.Lock()
        self._db = None


def _add_headers_column(db: sqlite3.Connection) -> None:
    """A cache made by an older version gains the provenance column (its entries stay without
    provenance, so they are misses); two processes may race to add it."""
    import sqlite3

    names = {row[1] for row in db.execute("PRAGMA table_info(answers)")}
    if "headers" in names:
        return
    try:
        db.execute("ALTER TABLE answers ADD COLUMN headers TEXT")
    except sqlite3.OperationalError:
        names = {row[1] for row in db.execute("PRAGMA table_info(answers)")}
        if "headers" not in names:
            raise


CacheOption = bool | str | os.PathLike[str] | ResultCache | None


def open_cache(cache: CacheOption, http_client: object = None) -> ResultCache | None:
    """The ``cache=`` argument of the clients: off, the default place, a path, or a cache."""
    from composo.errors import ComposoValidationError

    if cache is None or cache is False:
        return None
    if http_client is not None:
        raise ComposoValidationError(
            "cache: cannot be combined with http_client (the cache lives in the client's own "
            "transport); give your httpx client transport=composo.CachingTransport(inner, "
            "composo.ResultCache()) instead, or drop http_client"
        )
    if isinstance(cache, ResultCache):
        return cache
    if cache is True:
        return ResultCache()
    if isinstance(cache, (str, os.PathLike)):
        return ResultCache(cache)
    raise ComposoValidationError(
        "cache: expected True, False, a directory path or a ResultCache, got "
        f"{type(cache).__name__}"
    )


class _Counts:
    """Hits and misses, shared by the threads of one transport."""

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def count(self, hit: bool) -> None:
        with self._lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1


def _lookup_key(request: httpx.Request) -> str | None:
    """The request's key, or ``None`` if it must not be cached (not an evaluation, a background
    submission, or ``data_retention="none"``)."""
    if request.method != "POST" or request.url.path not in EVALUATION_PATHS:
        return None
    try:
        body = json.loads(request.content)
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("data_retention") == "none":
        return None
    base = f"{request.url.scheme}://{request.url.netloc.decode()}"
    return ResultCache.key(base, request.url.path, body)


def _answer(request: httpx.Request, body: bytes, provenance: dict[str, str]) -> httpx.Response:
    return httpx.Response(
        200,
        headers={**provenance, "content-type": "application/json", HIT_HEADER: "hit"},
        content=body,
        request=request,
    )


def provenance(response: httpx.Response) -> dict[str, str]:
    """The headers that say who judged an answer (none: the platform)."""
    return {
        k.lower(): v
        for k, v in response.headers.multi_items()
        if k.lower().startswith(PROVENANCE_PREFIX)
    }


def _storable(response: httpx.Response) -> bool:
    if not response.is_success:
        return False
    try:
        return isinstance(json.loads(response.content), dict)
    except ValueError:
        return False


class _Caching:
    """What both caching transports share: the cache, its counts, the lookup and the store."""

    def __init__(self, cache: ResultCache) -> None:
        self.cache = cache
        self._counts = _Counts()

    @property
    def hits(self) -> int:
        return self._counts.hits

    @property
    def misses(self) -> int:
        return self._counts.misses

    def _lookup(self, request: httpx.Request) -> tuple[str | None, httpx.Response | None]:
        """The request's key (``None``: not cached) and the stored answer, if any."""
        key = _lookup_key(request)
        if key is None:
            return None, None
        stored = self.cache.get(key)
        self._counts.count(stored is not None)
        return key, None if stored is None else _answer(request, *stored)

    def _kept(
        self, key: str, request: httpx.Request, response: httpx.Response, body: bytes
    ) -> httpx.Response:
        """The answer, decoded within the response limit, stored with its provenance when it is
        a success; handed on decoded (the client's own bounded reader then takes it as it is)."""
        answer = decoded(request, response, body)
        if _storable(answer):
            self.cache.put(key, body, provenance(answer))
        return answer


def decoded(request: httpx.Request, response: httpx.Response, body: bytes) -> httpx.Response:
    """``response`` with ``body`` (already decoded) as its content, and headers to match."""
    headers = [
        (k, v)
        for k, v in response.headers.multi_items()
        if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
    ]
    return httpx.Response(
        response.status_code,
        headers=headers,
        content=body,
        request=request,
        extensions=response.extensions,
    )


def _inflater(response: httpx.Response) -> Inflater:
    """The bounded reader for a body the cache must hold whole: the response limit applies
    here too, before anything is inflated in memory."""
    inflater = Inflater(response.headers.get("content-encoding"))
    inflater.check_length(response.headers.get("content-length"))
    return inflater


def read_whole(response: httpx.Response) -> bytes:
    """A sync response's body, decoded within the response limit; the response is closed."""
    inflater = _inflater(response)
    try:
        for chunk in response.stream:  # type: ignore[union-attr]
            inflater.feed(chunk)
    finally:
        response.close()
    return inflater.result()


class CachingTransport(_Caching, httpx.BaseTransport):
    """Answers a request from the cache when it can; stores what the server answers well.

    Args:
        inner: The transport that reaches the server.
        cache: Where answers are kept.
    """

    def __init__(self, inner: httpx.BaseTransport, cache: ResultCache) -> None:
        super().__init__(cache)
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        key, answer = self._lookup(request)
        if answer is not None:
            return answer
        response = self.inner.handle_request(request)
        if key is None:
            return response
        return self._kept(key, request, response, read_whole(response))

    def close(self) -> None:
        self.inner.close()


class AsyncCachingTransport(_Caching, httpx.AsyncBaseTransport):
    """The async form of :class:`CachingTransport` (SQLite lookups take well under a
    millisecond, so they run on the loop)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, cache: ResultCache) -> None:
        super().__init__(cache)
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        key, answer = self._lookup(request)
        if answer is not None:
            return answer
        response = await self.inner.handle_async_request(request)
        if key is None:
            return response
        inflater = _inflater(response)
        try:
            async for chunk in response.stream:  # type: ignore[union-attr]
                inflater.feed(chunk)
        finally:
            await response.aclose()
        return self._kept(key, request, response, inflater.result())

    async def aclose(self) -> None:
        await self.inner.aclose()
