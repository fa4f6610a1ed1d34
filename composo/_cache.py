"""A result cache that survives re-runs: the same request to the same server is answered from disk.

Keyed by base URL, path, model core and canonical body; only successes are stored (never for
``data_retention="none"``), with their provenance headers. One SQLite file in WAL mode, shared by
processes, bounded in size and age; it sits in the HTTP transport, so nothing above it changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from composo._core import forks
from composo._core.body import Inflater
from composo._core.provenance import CACHE_HEADER, CACHE_HIT, JUDGE_HEADERS
from composo.errors import ComposoValidationError

if TYPE_CHECKING:
    import sqlite3

CACHE_FILE = "results.sqlite3"
EVALUATION_PATHS = ("/api/v1/evals/reward", "/api/v1/evals/trace")
_BUSY_TIMEOUT = 30.0
_WAL_LIMIT = 8 * 1024 * 1024
CACHE_MAX_BYTES = 1024**3
"""Bytes of answers kept (1 GiB, some 300,000 answers); the oldest go first
(``COMPOSO_CACHE_MAX_SIZE``, ``ResultCache(max_bytes=...)``)."""
CACHE_MAX_AGE = 30 * 24 * 3600.0
"""Seconds an answer is kept and served (``COMPOSO_CACHE_MAX_AGE``, ``ResultCache(max_age=)``)."""
CACHE_EVICT_TO = 0.99
"""Share of ``max_bytes`` a write past it brings the cache down to: eviction runs once per
hundredth of the cap written (a few ms per MiB), not on every write."""
CACHE_ROW_OVERHEAD = 100  # bytes counted per answer for SQLite's row and index entries


def default_cache_dir() -> Path:
    """``COMPOSO_CACHE_DIR``, else ``composo`` in the user's cache directory."""
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
    """What :meth:`ResultCache.info` reports; ``size_bytes`` is on disk (with the write-ahead
    log), ``stored_bytes`` what counts against ``max_bytes``."""

    path: Path
    entries: int
    size_bytes: int
    stored_bytes: int = 0
    max_bytes: int = CACHE_MAX_BYTES
    max_age: float = CACHE_MAX_AGE


@dataclass(frozen=True)
class Pruned:
    """What :meth:`ResultCache.prune` removed: ``entries`` answers counting ``bytes``."""

    entries: int
    bytes: int


_AGE_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_size(text: str) -> int:
    """``"500MB"``, ``"2GB"``, ``"1.5 GiB"`` or a number of bytes (K, M, G, T: powers of 1024).

    Raises:
        ValueError: Not such a size, or not above zero; the message says how to write one.
    """
    found = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(?:([kmgt])i?)?b?\s*", text, re.IGNORECASE)
    power = "_kmgt".index(found.group(2).lower()) if found and found.group(2) else 0
    if found is None or float(found.group(1)) * 1024**power < 1:
        raise ValueError(f"{text!r} is not a size; write it as 500MB, 2GB or a number of bytes")
    return int(float(found.group(1)) * 1024**power)


def parse_age(text: str) -> float:
    """``"30d"``, ``"12h"``, ``"90m"``, ``"2w"`` or ``"3600s"``: seconds.

    Raises:
        ValueError: Not such an age (the unit is required), or not above zero.
    """
    found = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([A-Za-z]+)\s*", text)
    unit = found.group(2).lower() if found else ""
    if found is None or unit not in _AGE_UNITS or float(found.group(1)) <= 0:
        raise ValueError(f"{text!r} is not an age; write it as 30d, 12h, 90m or 3600s")
    return float(found.group(1)) * _AGE_UNITS[unit]


def _positive(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ComposoValidationError(f"{name}: expected a number above 0, got {value!r}")
    return value


def _limit(
    value: float | None, name: str, variable: str, parse: Callable[[str], float], default: float
) -> float:
    """An argument of :class:`ResultCache`, else its environment variable, else the default."""
    if value is not None:
        return _positive(value, name)
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        return parse(text)
    except ValueError as exc:
        raise ComposoValidationError(f"{variable}: {exc}") from None


_SCHEMA = (
    # size: what the answer counts for against the cap; total: their sum and count, kept by
    # the triggers, so that a write knows the cache's size without reading the table.
    "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, body BLOB NOT NULL, "
    "headers TEXT NOT NULL, stored REAL NOT NULL, size INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS answers_by_age ON answers (stored, size)",
    "CREATE TABLE IF NOT EXISTS total (one INTEGER PRIMARY KEY CHECK (one = 1), "
    "bytes INTEGER NOT NULL, entries INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO total VALUES (1, 0, 0)",
    "CREATE TRIGGER IF NOT EXISTS answer_added AFTER INSERT ON answers BEGIN "
    "UPDATE total SET bytes = bytes + NEW.size, entries = entries + 1; END",
    "CREATE TRIGGER IF NOT EXISTS answer_removed AFTER DELETE ON answers BEGIN "
    "UPDATE total SET bytes = bytes - OLD.size, entries = entries - 1; END",
    "CREATE TRIGGER IF NOT EXISTS answer_replaced AFTER UPDATE OF size ON answers BEGIN "
    "UPDATE total SET bytes = bytes + NEW.size - OLD.size; END",
)
# Bumped whenever _SCHEMA changes; a file with another number is emptied, never migrated.
_SCHEMA_VERSION = 2
_PUT = (
    "INSERT INTO answers (key, body, headers, stored, size) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET body = excluded.body, headers = excluded.headers, "
    "stored = excluded.stored, size = excluded.size"
)
_EVICT = (
    # One statement: what is past its age, then the oldest answers until what is left fits in
    # :target bytes (a row goes while the older rows' sizes it follows do not cover the excess).
    # Only the :rows oldest entries of the age index are read: no answer counts for less than
    # CACHE_ROW_OVERHEAD, so excess // CACHE_ROW_OVERHEAD + 1 rows always cover the excess.
    "DELETE FROM answers WHERE stored < :oldest OR rowid IN (SELECT rowid FROM ("
    "SELECT rowid, SUM(size) OVER (ORDER BY stored ROWS UNBOUNDED PRECEDING) - size AS older "
    "FROM (SELECT rowid, stored, size FROM answers ORDER BY stored LIMIT :rows)) "
    "WHERE older < (SELECT bytes FROM total) - :target)"
)


class ResultCache:
    """Stored answers keyed by request; safe for threads of one process and for many processes.

    The cache is bounded: a write that takes it past ``max_bytes`` removes the oldest answers
    first (down to 99% of the cap, so that this happens once in a while, not on every write),
    and an answer older than ``max_age`` is never served and is removed.

    Args:
        path: A directory (the file ``results.sqlite3`` is made in it) or a ``.sqlite3`` /
            ``.db`` file. Default: :func:`default_cache_dir`.
        max_bytes: Bytes of answers kept. Default: ``COMPOSO_CACHE_MAX_SIZE`` (``500MB``,
            ``2GB``...), else 1 GiB.
        max_age: Seconds an answer is kept. Default: ``COMPOSO_CACHE_MAX_AGE`` (``30d``,
            ``12h``...), else 30 days.

    Raises:
        ComposoValidationError: A limit (or its environment variable) is not a positive size or
            age.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        max_bytes: int | None = None,
        max_age: float | None = None,
    ) -> None:
        where = Path(path).expanduser() if path is not None else default_cache_dir()
        if where.suffix not in (".sqlite3", ".sqlite", ".db"):
            where = where / CACHE_FILE
        self.path = where
        self.max_bytes = int(
            _limit(max_bytes, "max_bytes", "COMPOSO_CACHE_MAX_SIZE", parse_size, CACHE_MAX_BYTES)
        )
        self.max_age = float(
            _limit(max_age, "max_age", "COMPOSO_CACHE_MAX_AGE", parse_age, CACHE_MAX_AGE)
        )
        self._db: sqlite3.Connection | None = None
        self._after_fork()
        forks.register(self)

    def _after_fork(self) -> None:
        """Opened on first use; SQLite connections must not cross a fork (a child opens its own)."""
        forks.leave_behind(self._db)
        self._db = None
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            import sqlite3  # here, so that importing the client does not load it

            self.path.parent.mkdir(parents=True, exist_ok=True)
            # timeout= is SQLite's busy timeout: a writer in another process is waited for
            db = sqlite3.connect(
                self.path, timeout=_BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            # the log is cut back to this after a checkpoint (a VACUUM writes the whole file)
            db.execute(f"PRAGMA journal_size_limit={_WAL_LIMIT}")
            with db:  # one transaction, so that processes opening a new file at once agree
                db.execute("BEGIN IMMEDIATE")
                if db.execute("PRAGMA user_version").fetchone()[0] != _SCHEMA_VERSION:
                    # a file of another layout (the cache is disposable: start it afresh)
                    for table in ("answers", "total"):
                        db.execute(f"DROP TABLE IF EXISTS {table}")
                    db.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
                for statement in _SCHEMA:
                    db.execute(statement)
            # what aged since the last run (an index range), and all past a lowered cap
            db.execute("DELETE FROM answers WHERE stored < ?", (time.time() - self.max_age,))
            if _total(db) > self.max_bytes:
                self._evict(db, int(self.max_bytes * CACHE_EVICT_TO))
            self._db = db
        return self._db

    def _evict(self, db: sqlite3.Connection, target: int, max_age: float | None = None) -> int:
        """:data:`_EVICT` down to ``target`` bytes; how many answers went."""
        oldest = time.time() - (self.max_age if max_age is None else max_age)
        rows = max(0, _total(db) - target) // CACHE_ROW_OVERHEAD + 1
        found = {"oldest": oldest, "target": target, "rows": rows}
        return int(db.execute(_EVICT, found).rowcount)

    @staticmethod
    def key(base_url: str, path: str, body: Any) -> str:
        """The content address of one request: base URL, path, model core and canonical body."""
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        model_core = body.get("model_core") if isinstance(body, dict) else None
        material = "\n".join([base_url.rstrip("/"), path, str(model_core or ""), canonical])
        return hashlib.sha256(material.encode()).hexdigest()

    def get(self, key: str) -> tuple[bytes, dict[str, str]] | None:
        """The stored answer and its provenance headers, if there is one within ``max_age``."""
        query = "SELECT body, headers FROM answers WHERE key = ? AND stored >= ?"
        with self._lock:
            row = self._connect().execute(query, (key, time.time() - self.max_age)).fetchone()
        if row is None:
            return None
        with contextlib.suppress(ValueError, AttributeError):  # headers not a JSON object
            return bytes(row[0]), {str(k): str(v) for k, v in json.loads(row[1]).items()}
        return None

    def put(self, key: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        """Store an answer with its provenance headers (``{}``: the platform's); past the cap,
        the oldest answers make room."""
        kept = json.dumps(headers or {}, sort_keys=True)
        size = len(key) + len(body) + len(kept) + CACHE_ROW_OVERHEAD
        with self._lock:
            db = self._connect()
            db.execute(_PUT, (key, body, kept, time.time(), size))
            if _total(db) > self.max_bytes:
                self._evict(db, int(self.max_bytes * CACHE_EVICT_TO))

    def info(self) -> CacheInfo:
        """How many answers are stored, what they count for, and how much disk they take."""
        if not self.path.exists():
            return CacheInfo(self.path, 0, 0, 0, self.max_bytes, self.max_age)
        with self._lock:
            entries, stored = self._connect().execute("SELECT entries, bytes FROM total").fetchone()
        size = sum(
            p.stat().st_size
            for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))
            if p.exists()
        )
        return CacheInfo(self.path, int(entries), size, int(stored), self.max_bytes, self.max_age)

    def prune(self, max_bytes: int | None = None, max_age: float | None = None) -> Pruned:
        """Remove what is older than ``max_age`` and the oldest answers past ``max_bytes``
        (default: the cache's own limits), then hand the freed pages back to the disk."""
        target = self.max_bytes if max_bytes is None else int(_positive(max_bytes, "max_bytes"))
        age = self.max_age if max_age is None else _positive(max_age, "max_age")
        if not self.path.exists():
            return Pruned(0, 0)
        with self._lock:
            db = self._connect()
            before = _total(db)
            removed = self._evict(db, target, age)
            freed = before - _total(db)
            if removed:
                self._compact(db)
        return Pruned(removed, freed)

    def clear(self) -> int:
        """Remove every stored answer; the number removed."""
        if not self.path.exists():
            return 0
        with self._lock:
            db = self._connect()
            removed = db.execute("DELETE FROM answers").rowcount
            self._compact(db)
        return int(removed)

    @staticmethod
    def _compact(db: sqlite3.Connection) -> None:
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __getstate__(self) -> dict[str, Any]:  # a connection cannot travel to another process
        return {"path": self.path, "max_bytes": self.max_bytes, "max_age": self.max_age}

    def __setstate__(self, state: dict[str, Any]) -> None:
        ResultCache.__init__(self, **state)


def _total(db: sqlite3.Connection) -> int:
    (total,) = db.execute("SELECT bytes FROM total").fetchone()
    return int(total)


CacheOption = bool | str | os.PathLike[str] | ResultCache | None


def open_cache(cache: CacheOption, http_client: object = None) -> ResultCache | None:
    """The ``cache=`` argument of the clients: off, the default place, a path, or a cache."""
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
    if cache is True or isinstance(cache, (str, os.PathLike)):
        return ResultCache(None if cache is True else cache)
    raise ComposoValidationError(
        "cache: expected True, False, a directory path or a ResultCache, got "
        f"{type(cache).__name__}"
    )


def _lookup_key(request: httpx.Request) -> str | None:
    """The request's key, or ``None`` if it must not be cached."""
    if request.method != "POST" or request.url.path not in EVALUATION_PATHS:
        return None
    body = _json_object(request.content)
    if body is None or body.get("data_retention") == "none":
        return None
    base = f"{request.url.scheme}://{request.url.netloc.decode()}"
    return ResultCache.key(base, request.url.path, body)


def _inflater(response: httpx.Response) -> Inflater:
    """A bounded reader: the response limit applies to what the cache holds whole too."""
    inflater = Inflater(response.headers.get("content-encoding"))
    inflater.check_length(response.headers.get("content-length"))
    return inflater


_CODED = ("content-encoding", "content-length", "transfer-encoding")


def _json_object(data: bytes) -> dict[str, Any] | None:
    with contextlib.suppress(ValueError):
        value = json.loads(data)
        return value if isinstance(value, dict) else None
    return None


class _Caching:
    """What both caching transports share. ``hits`` and ``misses`` count lookups; ``sent``
    counts every request handed to the server (any path, every attempt) that reached it."""

    def __init__(self, cache: ResultCache) -> None:
        self.cache = cache
        self.hits = self.misses = self.sent = 0
        self._lock = threading.Lock()

    def _lookup(self, request: httpx.Request) -> tuple[str | None, httpx.Response | None]:
        key = _lookup_key(request)
        if key is None:
            return None, None
        stored = self.cache.get(key)
        with self._lock:
            if stored is None:
                self.misses += 1
                return key, None
            self.hits += 1
        body, provenance = stored
        headers = {**provenance, "content-type": "application/json", CACHE_HEADER: CACHE_HIT}
        return key, httpx.Response(200, headers=headers, content=body, request=request)

    @contextlib.contextmanager
    def _sending(self) -> Iterator[None]:
        with self._lock:
            self.sent += 1
        try:
            yield
        except (httpx.ConnectError, httpx.ConnectTimeout):  # it never reached the server
            with self._lock:
                self.sent -= 1
            raise

    def _kept(
        self, key: str, request: httpx.Request, response: httpx.Response, body: bytes
    ) -> httpx.Response:
        """The answer with its body decoded (and headers to match), stored with its provenance
        when it is a success."""
        answer = httpx.Response(
            response.status_code,
            headers=[(k, v) for k, v in response.headers.multi_items() if k.lower() not in _CODED],
            content=body,
            request=request,
            extensions=response.extensions,
        )
        if answer.is_success and _json_object(body) is not None:
            found = {name: answer.headers[name] for name in JUDGE_HEADERS if name in answer.headers}
            self.cache.put(key, body, found)
        return answer


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
        with self._sending():
            response = self.inner.handle_request(request)
        if key is None:
            return response
        inflater = _inflater(response)
        try:
            for chunk in response.stream:  # type: ignore[union-attr]
                inflater.feed(chunk)
        finally:
            response.close()
        return self._kept(key, request, response, inflater.result())

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
        with self._sending():
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
