"""Background tasks in SQLite, so a server killed with tasks pending finishes them after restart.
Each server (``owner``) leases the tasks it runs and holds an OS lock the kernel frees however the
process ends; another takes over an expired lease or a free lock. Every change is conditional."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tenacity import retry, retry_if_exception, stop_after_delay, wait_random_exponential

from composo.server._config import DEFAULT_TASK_LEASE

KEEP_FINISHED_SECONDS = 7 * 24 * 3600  # finished tasks are forgotten after a week

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows: leases alone decide there
    fcntl = None  # type: ignore[assignment]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS tasks (task_id TEXT PRIMARY KEY, kind TEXT NOT NULL,
        status TEXT NOT NULL, retain INTEGER NOT NULL, request TEXT, result TEXT, error TEXT,
        owner TEXT, created REAL NOT NULL, updated REAL NOT NULL)""",
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
# Columns added after the first release; older files gain them on open.
_ADDED_COLUMNS = {"lease_until": "REAL", "client": "TEXT", "idem": "TEXT", "idem_request": "TEXT"}
_INDEXES = (
    "CREATE INDEX IF NOT EXISTS tasks_unfinished ON tasks (status) "
    "WHERE status IN ('pending', 'running')",
    "CREATE UNIQUE INDEX IF NOT EXISTS tasks_idem ON tasks (idem) WHERE idem IS NOT NULL",
)
_BUSY_SECONDS = 10.0  # how long a call waits for another connection's lock
_UNFINISHED = "status IN ('pending', 'running')"
_LOST = (
    "the server stopped before this task finished and, as data_retention='none' asked, its "
    "content was never written to disk, so it cannot be resumed; submit it again"
)


def open_database(
    path: Path | None, schema: Callable[[sqlite3.Connection], None]
) -> sqlite3.Connection:
    """A shared autocommit connection (``None``: in memory; a file is private, in WAL mode);
    ``schema`` runs in one transaction, retried while other servers set up the same new file."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(
        ":memory:" if path is None else str(path),
        check_same_thread=False,
        isolation_level=None,
        timeout=_BUSY_SECONDS,
    )
    try:
        _set_up(db, path is not None, schema)
        if path is not None:
            os.chmod(path, 0o600)
    except BaseException:
        db.close()
        raise
    return db


@retry(
    retry=retry_if_exception(
        lambda e: isinstance(e, sqlite3.OperationalError) and "locked" in str(e)
    ),
    wait=wait_random_exponential(multiplier=0.005, max=0.2),
    stop=stop_after_delay(_BUSY_SECONDS),
    reraise=True,
)
def _set_up(
    db: sqlite3.Connection, on_disk: bool, schema: Callable[[sqlite3.Connection], None]
) -> None:
    if on_disk:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
    with transaction(db):
        schema(db)


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, rolled back on any error."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


class TaskStoreError(ValueError):
    """The task database cannot be created, opened or written at the configured path."""


class IdempotencyConflict(ValueError):
    """An ``Idempotency-Key`` already names a task with a different request."""


@dataclass(frozen=True)
class StoredTask:
    task_id: str
    kind: str
    status: str
    retain: bool
    request: str | None
    result: dict[str, Any] | None
    error: str | None
    client: str | None = None


class TaskStore:
    """One short transaction a call; ``lease_seconds``: how long a silent server keeps a task."""

    def __init__(self, path: Path | None, lease_seconds: float = DEFAULT_TASK_LEASE) -> None:
        self.path = path
        self.lease_seconds = lease_seconds
        self.owner = uuid.uuid4().hex
        self._lock = threading.Lock()
        try:
            self._db = open_database(path, self._tables)
        except (OSError, sqlite3.Error) as exc:
            raise TaskStoreError(f"cannot open the task database {path}: {exc}") from exc
        try:
            self._lock_file = None if path is None else self._hold_owner_lock()
        except OSError as exc:
            self._db.close()
            raise TaskStoreError(f"cannot use the task database {path}: {exc}") from exc

    def _tables(self, db: sqlite3.Connection) -> None:
        """Create or update the tables and forget long-finished tasks."""
        for statement in _SCHEMA:
            db.execute(statement)
        have = {row[1] for row in db.execute("PRAGMA table_info(tasks)")}
        for column, kind in _ADDED_COLUMNS.items():
            if column not in have:
                db.execute(f"ALTER TABLE tasks ADD COLUMN {column} {kind}")
        for statement in _INDEXES:
            db.execute(statement)
        db.execute(
            "INSERT OR IGNORE INTO meta (name, value) VALUES ('salt', ?)", (secrets.token_hex(16),)
        )
        (salt,) = db.execute("SELECT value FROM meta WHERE name = 'salt'").fetchone()
        self._salt = bytes.fromhex(salt)
        db.execute(
            "DELETE FROM tasks WHERE status IN ('succeeded', 'failed') AND updated < ?",
            (time.time() - KEEP_FINISHED_SECONDS,),
        )

    def _owners_dir(self) -> Path:
        assert self.path is not None
        return self.path.with_name(f".{self.path.name}.owners")

    def _hold_owner_lock(self) -> IO[bytes] | None:
        """Lock a file named after this owner for as long as the process lives."""
        if fcntl is None:  # pragma: no cover
            return None
        folder = self._owners_dir()
        folder.mkdir(mode=0o700, exist_ok=True)
        handle = open(folder / f"{self.owner}.lock", "wb")  # noqa: SIM115 (held until close)
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        return handle

    def _owner_gone(self, owner: str) -> bool:
        """True when ``owner`` left a lock file that no live process holds."""
        if fcntl is None or self.path is None or not owner.isalnum():
            return False
        lock_path = self._owners_dir() / f"{owner}.lock"
        try:  # held: its server is alive; missing: only the lease can tell
            with open(lock_path, "rb") as handle:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        with contextlib.suppress(OSError):
            lock_path.unlink()
        return True

    def close(self) -> None:
        """The owner's lock file stays (unlocked: this server is gone) while it holds tasks."""
        with self._lock:
            holds = self._db.execute(
                f"SELECT 1 FROM tasks WHERE owner = ? AND {_UNFINISHED} LIMIT 1", (self.owner,)
            ).fetchone()
            self._db.close()
        if self._lock_file is not None:
            if holds is None:
                with contextlib.suppress(OSError):
                    (self._owners_dir() / f"{self.owner}.lock").unlink()
            self._lock_file.close()
            self._lock_file = None

    def client_id(self, api_key: str | bytes | None) -> str | None:
        """A salted digest of the API key a task belongs to; the key itself is never stored."""
        if not api_key:
            return None
        raw = api_key.encode() if isinstance(api_key, str) else api_key
        return hmac.new(self._salt, raw, hashlib.sha256).hexdigest()

    def add(
        self,
        task_id: str,
        kind: str,
        request: str | None,
        client: str | None = None,
        idempotency_key: str | None = None,
        request_digest: str | None = None,
    ) -> str:
        """Record a task leased to this server (``request=None``: content kept off disk) and
        return its id, or the id of the client's task already accepted under ``idempotency_key``."""
        now = time.time()
        # The client's key, digested as an API key is (never stored itself).
        idem = None if idempotency_key is None else f"{client or ''}\0{idempotency_key}"
        idem = self.client_id(idem)
        with self._lock:
            if idem is not None:
                row = self._db.execute(
                    "SELECT task_id, idem_request FROM tasks WHERE idem = ?", (idem,)
                ).fetchone()
                if row is not None:
                    seen = row[1]
                    if seen is not None and request_digest is not None and seen != request_digest:
                        raise IdempotencyConflict(idempotency_key)
                    return str(row[0])
            lease, retain = now + self.lease_seconds, int(request is not None)
            digest = request_digest if idem is not None else None
            self._db.execute(
                "INSERT INTO tasks (task_id, kind, status, retain, request, owner, created,"
                " updated, lease_until, client, idem, idem_request)"
                " VALUES (?1, ?2, 'pending', ?3, ?4, ?5, ?6, ?6, ?7, ?8, ?9, ?10)",
                (task_id, kind, retain, request, self.owner, now, lease, client, idem, digest),
            )
        return task_id

    def start(self, task_id: str) -> bool:
        """Mark running if this server still owns it unfinished; ``False``: do not run it."""
        with self._lock:
            cur = self._db.execute(
                "UPDATE tasks SET status = 'running', updated = ?, lease_until = ?"
                f" WHERE task_id = ? AND owner = ? AND {_UNFINISHED}",
                (time.time(), time.time() + self.lease_seconds, task_id, self.owner),
            )
        return cur.rowcount == 1

    def finish(self, task_id: str, result: dict[str, Any] | None, error: str | None) -> bool:
        """Mark done (the first answer wins; ``False`` if already finished)."""
        status = "failed" if error is not None else "succeeded"
        data = None if result is None else json.dumps(result)
        with self._lock:
            cur = self._db.execute(
                "UPDATE tasks SET status = ?, error = ?, updated = ?, lease_until = NULL,"
                " result = CASE WHEN retain = 1 THEN ? ELSE NULL END, request = NULL"
                f" WHERE task_id = ? AND {_UNFINISHED}",
                (status, error, time.time(), data, task_id),
            )
        return cur.rowcount == 1

    def renew(self) -> None:
        """Extend this server's lease on every task it holds."""
        with self._lock:
            self._db.execute(
                f"UPDATE tasks SET lease_until = ? WHERE owner = ? AND {_UNFINISHED}",
                (time.time() + self.lease_seconds, self.owner),
            )

    def get(self, task_id: str) -> StoredTask | None:
        with self._lock:
            row = self._db.execute(
                "SELECT task_id, kind, status, retain, request, result, error, client FROM tasks"
                " WHERE task_id = ?",
                (task_id,),
            ).fetchone()
        if row is None:
            return None
        task_id, kind, status, retain, request, result, error, client = row
        result = None if result is None else json.loads(result)
        return StoredTask(task_id, kind, status, bool(retain), request, result, error, client)

    def claim(self) -> list[StoredTask]:
        """Take over unfinished tasks whose lease expired or whose server is gone; those kept
        only in their server's memory fail, the rest are returned to resume."""
        now = time.time()
        with self._lock:
            rows = self._db.execute(
                f"SELECT DISTINCT owner FROM tasks WHERE {_UNFINISHED}"
                " AND owner IS NOT NULL AND owner != ? AND lease_until >= ?",
                (self.owner, now),
            ).fetchall()
        gone = [owner for (owner,) in rows if self._owner_gone(owner)]
        # Unowned, its lease expired or its owner gone: read and taken in one write transaction.
        where = (
            f"{_UNFINISHED} AND owner IS NOT ? AND (owner IS NULL OR lease_until IS NULL"
            f" OR lease_until < ? OR owner IN ({','.join('?' * len(gone)) or 'NULL'}))"
        )
        args = (self.owner, now, *gone)
        with self._lock, transaction(self._db):
            rows = self._db.execute(f"SELECT task_id FROM tasks WHERE {where}", args).fetchall()
            taken = [tid for (tid,) in rows]
            if taken:
                self._db.execute(
                    "UPDATE tasks SET owner = ?, status = 'pending', updated = ?, lease_until = ?"
                    f" WHERE {where}",
                    (self.owner, now, now + self.lease_seconds, *args),
                )
                self._fail_lost(now, taken)
        tasks = [self.get(tid) for tid in taken]
        return [
            t for t in tasks if t is not None and t.status == "pending" and t.request is not None
        ]

    def release_unfinished(self) -> None:
        """On a clean stop: hand unfinished tasks to whichever server starts next."""
        now = time.time()
        with self._lock:
            self._db.execute(
                "UPDATE tasks SET owner = NULL, status = 'pending', updated = ?, lease_until = NULL"
                f" WHERE owner = ? AND {_UNFINISHED} AND retain = 1",
                (now, self.owner),
            )
            self._fail_lost(now)

    def _fail_lost(self, now: float, among: list[str] | None = None) -> None:
        """Fail this server's unfinished tasks whose content was never written (of ``among``)."""
        only = "" if among is None else f" AND task_id IN ({','.join('?' * len(among))})"
        self._db.execute(
            "UPDATE tasks SET status = 'failed', error = ?, updated = ?, lease_until = NULL"
            f" WHERE owner = ? AND retain = 0 AND {_UNFINISHED}{only}",
            (_LOST, now, self.owner, *(among or ())),
        )
