"""Background tasks in SQLite, so a server killed with tasks pending finishes them after restart.

Each server instance owns the tasks it accepted (``owner`` = pid and a random id). At start it
claims the unfinished tasks of owners that are gone, so two servers sharing one file never run a
task twice. Requests with ``data_retention="none"`` are stored without their body or result; if
their server dies before answering, they are marked failed with a message saying why.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["KEEP_FINISHED_SECONDS", "StoredTask", "TaskStore", "TaskStoreError"]

KEEP_FINISHED_SECONDS = 7 * 24 * 3600  # finished tasks are forgotten after a week

# Owners of the stores open in this process. A server restarted under the same pid (the usual
# case in a container, where it is pid 1 every time) must still see its predecessor as gone.
_open_owners: set[str] = set()

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    retain INTEGER NOT NULL,
    request TEXT,
    result TEXT,
    error TEXT,
    owner TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_unfinished ON tasks (status)
    WHERE status IN ('pending', 'running');
"""
_LOST = (
    "the server stopped before this task finished and, as data_retention='none' asked, its "
    "content was never written to disk, so it cannot be resumed; submit it again"
)


class TaskStoreError(ValueError):
    """The task database cannot be created, opened or written at the configured path."""


@dataclass(frozen=True)
class StoredTask:
    task_id: str
    kind: str
    status: str
    retain: bool
    request: str | None
    result: dict[str, Any] | None
    error: str | None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


class TaskStore:
    """A small synchronous store; every call is one short transaction under a lock."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.owner = f"{os.getpid()}:{uuid.uuid4().hex}"
        try:
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                ":memory:" if path is None else str(path),
                check_same_thread=False,
                isolation_level=None,
                timeout=10.0,
            )
        except (OSError, sqlite3.Error) as exc:
            raise TaskStoreError(f"cannot open the task database {path}: {exc}") from exc
        self._lock = threading.Lock()
        try:
            with self._lock:
                if path is not None:
                    self._db.execute("PRAGMA journal_mode=WAL")
                    self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.executescript(_SCHEMA)
                self._db.execute(
                    "DELETE FROM tasks WHERE status IN ('succeeded', 'failed') AND updated < ?",
                    (time.time() - KEEP_FINISHED_SECONDS,),
                )
            if path is not None:
                os.chmod(path, 0o600)
        except (OSError, sqlite3.Error) as exc:
            self._db.close()
            raise TaskStoreError(f"cannot use the task database {path}: {exc}") from exc
        _open_owners.add(self.owner)

    def close(self) -> None:
        _open_owners.discard(self.owner)
        with self._lock:
            self._db.close()

    def add(self, task_id: str, kind: str, request: str | None) -> None:
        """Record an accepted task; ``request=None`` keeps its content off disk."""
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO tasks"
                " (task_id, kind, status, retain, request, owner, created, updated)"
                " VALUES (?, ?, 'pending', ?, ?, ?, ?, ?)",
                (task_id, kind, int(request is not None), request, self.owner, now, now),
            )

    def set_running(self, task_id: str) -> None:
        self._update(task_id, "running", None, None)

    def finish(self, task_id: str, result: dict[str, Any] | None, error: str | None) -> None:
        """Mark done; the result is written only for tasks that may keep content."""
        self._update(task_id, "failed" if error is not None else "succeeded", result, error)

    def _update(
        self, task_id: str, status: str, result: dict[str, Any] | None, error: str | None
    ) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE tasks SET status = ?, error = ?, updated = ?,"
                " result = CASE WHEN retain = 1 THEN ? ELSE NULL END,"
                " request = CASE WHEN ? IN ('succeeded', 'failed') THEN NULL ELSE request END"
                " WHERE task_id = ?",
                (
                    status,
                    error,
                    time.time(),
                    None if result is None else json.dumps(result),
                    status,
                    task_id,
                ),
            )

    def get(self, task_id: str) -> StoredTask | None:
        with self._lock:
            row = self._db.execute(
                "SELECT task_id, kind, status, retain, request, result, error FROM tasks"
                " WHERE task_id = ?",
                (task_id,),
            ).fetchone()
        if row is None:
            return None
        return StoredTask(
            task_id=row[0],
            kind=row[1],
            status=row[2],
            retain=bool(row[3]),
            request=row[4],
            result=None if row[5] is None else json.loads(row[5]),
            error=row[6],
        )

    def claim_orphans(self) -> list[StoredTask]:
        """Take over unfinished tasks whose server is gone; return those that can be resumed."""
        with self._lock:
            rows = self._db.execute(
                "SELECT task_id, owner FROM tasks WHERE status IN ('pending', 'running')"
            ).fetchall()
            orphans = [tid for tid, owner in rows if self._is_orphan(owner)]
            claimed: list[str] = []
            for tid in orphans:
                cur = self._db.execute(
                    "UPDATE tasks SET owner = ?, status = 'pending', updated = ?"
                    " WHERE task_id = ? AND status IN ('pending', 'running') AND"
                    " owner IS ? ",
                    (self.owner, time.time(), tid, dict(rows)[tid]),
                )
                if cur.rowcount:
                    claimed.append(tid)
            self._db.execute(
                "UPDATE tasks SET status = 'failed', error = ?, updated = ?"
                " WHERE owner = ? AND retain = 0 AND status = 'pending'",
                (_LOST, time.time(), self.owner),
            )
        tasks = [self.get(tid) for tid in claimed]
        return [
            t for t in tasks if t is not None and t.status == "pending" and t.request is not None
        ]

    def _is_orphan(self, owner: str | None) -> bool:
        if owner is None:
            return True
        if owner == self.owner:
            return False
        pid_text, _, _ = owner.partition(":")
        try:
            pid = int(pid_text)
        except ValueError:
            return True
        if pid == os.getpid():
            return owner not in _open_owners
        return not _pid_alive(pid)

    def release_unfinished(self) -> None:
        """On a clean stop: hand unfinished tasks to whichever server starts next."""
        with self._lock:
            self._db.execute(
                "UPDATE tasks SET owner = NULL, status = 'pending', updated = ?"
                " WHERE owner = ? AND status IN ('pending', 'running') AND retain = 1",
                (time.time(), self.owner),
            )
            self._db.execute(
                "UPDATE tasks SET status = 'failed', error = ?, updated = ?"
                " WHERE owner = ? AND status IN ('pending', 'running') AND retain = 0",
                (_LOST, time.time(), self.owner),
            )
