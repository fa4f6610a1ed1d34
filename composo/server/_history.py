"""What the local server served, per API key in SQLite: evaluation history, monthly usage and
the traces evaluations named. Answers are queued and written in one transaction a few times a
second (and before every read); history is bounded by age and rows, usage is counted apart."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import math
import sqlite3
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from composo._core.wire import DEFAULT_MODEL_CORE, RewardRequest, TraceRequest
from composo._platform_types import EvaluationFilterRequest
from composo.server._config import ServerConfig
from composo.server._store import open_database, transaction
from composo.server.judges import JudgeError

_log = logging.getLogger("composo.server")
Runner = Callable[[RewardRequest | TraceRequest], Awaitable[dict[str, Any]]]

DEFAULT_PAGE_SIZE = 100  # the reference's example for the evaluations filter
MAX_PAGE_SIZE = 1000  # a page of the evaluations filter holds at most this many
_PRUNE_EVERY = 60.0  # seconds between pruning passes

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS history_evaluations (id TEXT PRIMARY KEY, client TEXT,
        created REAL NOT NULL, endpoint TEXT NOT NULL, kind TEXT NOT NULL,
        status INTEGER NOT NULL, latency_ms REAL, criterion TEXT, model TEXT, tags TEXT NOT NULL,
        request TEXT, response TEXT, tokens INTEGER, trace_id TEXT)""",
    "CREATE INDEX IF NOT EXISTS history_by_client ON history_evaluations (client, created)",
    """CREATE TABLE IF NOT EXISTS history_usage (client TEXT NOT NULL, month TEXT NOT NULL,
        model TEXT NOT NULL, requests INTEGER NOT NULL, tokens INTEGER NOT NULL,
        PRIMARY KEY (client, month, model))""",
    """CREATE TABLE IF NOT EXISTS history_traces (client TEXT NOT NULL, trace_id TEXT NOT NULL,
        created REAL NOT NULL, updated REAL NOT NULL, tags TEXT NOT NULL, trace TEXT NOT NULL,
        PRIMARY KEY (client, trace_id))""",
    "CREATE INDEX IF NOT EXISTS traces_by_client ON history_traces (client, created)",
    """CREATE TABLE IF NOT EXISTS history_trace_evaluations (client TEXT NOT NULL,
        trace_id TEXT NOT NULL, created REAL NOT NULL, body TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS trace_evaluations_by_trace "
    "ON history_trace_evaluations (client, trace_id)",
)


def _tables(db: sqlite3.Connection) -> None:
    for statement in _SCHEMA:
        db.execute(statement)


class Caller(NamedTuple):
    """Who asked, and on which path: set by the route, read where the answer is recorded."""

    api_key: bytes | None
    endpoint: str


# Set by the evaluation routes; a background task started by a request inherits it.
CALLER: ContextVar[Caller | None] = ContextVar("composo_caller", default=None)


class _Served(NamedTuple):
    caller: Caller | None
    created: float
    request: RewardRequest | TraceRequest
    status: int
    latency_ms: float
    result: dict[str, Any] | None


class HistoryStore:
    """Kept beside the task database (``None``: in memory), under ``client_id(api_key)``, never
    the key; ``history_days=0`` keeps no history (usage is still counted)."""

    def __init__(
        self, config: ServerConfig, client_id: Callable[[bytes | None], str | None]
    ) -> None:
        self.keep_days, self.max_rows = config.history_days, config.history_max_rows
        self._client_id = client_id
        self._pending: list[_Served] = []
        self._lock = threading.Lock()
        self._next_prune = 0.0
        self._since_prune = 0  # rows written since the last pruning pass
        # Pruned at least this often (and whenever a tenth of the row budget was written).
        self._prune_every = min(_PRUNE_EVERY, max(0.5, self.keep_days * 86400.0 / 4))
        db = config.db
        path = None if db is None else db.with_name(f"{db.stem}-history{db.suffix or '.sqlite3'}")
        self._db = open_database(path, _tables)

    def flush(self) -> None:
        """Write what was recorded since the last flush, in one transaction."""
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        now = time.time()
        self._since_prune += len(batch)
        prune = now >= self._next_prune or self._since_prune > self.max_rows // 10
        if not batch and not prune:
            return
        try:
            with transaction(self._db):
                for served in batch:
                    self._write(served)
                if prune:
                    self._prune(now)
        except BaseException:
            self._pending[:0] = batch  # kept for the next try, never dropped
            raise
        if prune:
            self._next_prune, self._since_prune = now + self._prune_every, 0

    def _write(self, served: _Served) -> None:
        request = served.request
        client = self._client_id(served.caller.api_key if served.caller else None)
        kind = "trace" if isinstance(request, TraceRequest) else "reward"
        model = request.model_core or DEFAULT_MODEL_CORE
        if served.status == 200:
            self._db.execute(
                "INSERT INTO history_usage (client, month, model, requests, tokens) "
                "VALUES (?, ?, ?, 1, 0) ON CONFLICT (client, month, model) "
                "DO UPDATE SET requests = requests + 1",
                (client or "", _month(served.created), model),
            )
        if self.keep_days <= 0:
            return
        keep = request.data_retention != "none"
        criterion = request.evaluation_criteria or request.evaluator_name
        endpoint = served.caller.endpoint if served.caller else f"/api/v1/evals/{kind}/background"
        trace_id = None if request.trace_id is None else str(request.trace_id)
        stored = request.model_dump_json(exclude_none=True) if keep else None
        answer = json.dumps(served.result) if keep and served.result is not None else None
        values = [str(uuid.uuid4()), client, served.created, endpoint, kind, served.status]
        values += [served.latency_ms, criterion, model, json.dumps(request.tags or {})]
        self._db.execute(
            "INSERT INTO history_evaluations (id, client, created, endpoint, kind, status, "
            "latency_ms, criterion, model, tags, request, response, tokens, trace_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)",
            (*values, stored, answer, trace_id),
        )
        if trace_id is not None and served.result is not None:
            self._write_trace(client or "", trace_id, served, keep)

    def _write_trace(self, client: str, trace_id: str, served: _Served, keep: bool) -> None:
        request, result = served.request, served.result or {}
        content: dict[str, Any] = {}
        if keep and isinstance(request, TraceRequest):
            content = request.trace.model_dump(mode="json", exclude_none=True)
        # A later answer adds its tags, and its trace unless it kept none.
        self._db.execute(
            "INSERT INTO history_traces (client, trace_id, created, updated, tags, trace) "
            "VALUES (?1, ?2, ?3, ?3, ?4, ?5) ON CONFLICT (client, trace_id) DO UPDATE SET "
            "updated = excluded.updated, tags = json_patch(tags, excluded.tags), "
            "trace = CASE excluded.trace WHEN '{}' THEN trace ELSE excluded.trace END",
            (client, trace_id, served.created, json.dumps(request.tags or {}), json.dumps(content)),
        )
        for body in _trace_evaluations(request, result, keep):
            self._db.execute(
                "INSERT INTO history_trace_evaluations (client, trace_id, created, body) "
                "VALUES (?, ?, ?, ?)",
                (client, trace_id, served.created, json.dumps(body)),
            )

    def _prune(self, now: float) -> None:
        db = self._db
        oldest = now - self.keep_days * 86400.0
        db.execute("DELETE FROM history_evaluations WHERE created < ?", (oldest,))
        db.execute("DELETE FROM history_traces WHERE updated < ?", (oldest,))
        db.execute("DELETE FROM history_trace_evaluations WHERE created < ?", (oldest,))
        for table in ("history_evaluations", "history_traces"):
            db.execute(
                f"DELETE FROM {table} WHERE rowid <= (SELECT rowid FROM {table} "
                "ORDER BY rowid DESC LIMIT 1 OFFSET ?)",
                (self.max_rows,),
            )
        db.execute(
            "DELETE FROM history_trace_evaluations WHERE NOT EXISTS (SELECT 1 FROM history_traces "
            "t WHERE t.client = history_trace_evaluations.client "
            "AND t.trace_id = history_trace_evaluations.trace_id)"
        )
        db.execute("DELETE FROM history_usage WHERE month < ?", (_month(now - 366 * 86400.0),))

    def usage(self, api_key: bytes | None) -> dict[str, Any]:
        """``GET /api/v1/usage`` for this key: this month's requests per model core."""
        now = time.time()
        with self._lock:
            self._flush()
            rows = self._db.execute(
                "SELECT model, requests, tokens FROM history_usage WHERE client = ? AND month = ? "
                "ORDER BY model",
                (self._client_id(api_key) or "", _month(now)),
            ).fetchall()
        models = {m: {"request_count": r, "token_count": t} for m, r, t in rows}
        return {
            "usage": {
                "monthly_token_quota": None,
                "models": models,
                "total_current_request_count": sum(r for _, r, _ in rows),
                "total_current_token_count": sum(t for _, _, t in rows),
            },
            "quota_reset_date": _next_month(now),
        }

    def evaluations(self, api_key: bytes | None, query: EvaluationFilterRequest) -> dict[str, Any]:
        """``POST /api/v1/evaluations/filter``: newest first; every filter given must match
        (a tag filter: the tag has one of its values)."""
        where = ["client IS ?", "kind = coalesce(?, kind)"]
        args: list[Any] = [self._client_id(api_key), query.endpoint_type]
        for tag in query.filters or ():
            marks = ", ".join("?" * len(tag.values))
            where.append(
                f"EXISTS (SELECT 1 FROM json_each(tags) WHERE key = ? AND value IN ({marks}))"
            )
            args += [tag.key, *tag.values]
        if query.criteria_filter is not None:
            values = query.criteria_filter.values
            where.append(f"criterion IN ({', '.join('?' * len(values))})")
            args += values
        page = query.page or 1
        size = query.page_size or DEFAULT_PAGE_SIZE
        clause = " AND ".join(where)
        with self._lock:
            self._flush()
            (total,) = self._db.execute(
                f"SELECT COUNT(*) FROM history_evaluations WHERE {clause}", args
            ).fetchone()
            rows = self._db.execute(
                "SELECT id, created, endpoint, status, latency_ms, model, tags, request, "
                f"response, tokens FROM history_evaluations WHERE {clause} "
                "ORDER BY created DESC, rowid DESC LIMIT ? OFFSET ?",
                [*args, size, (page - 1) * size],
            ).fetchall()
        return {
            "evaluations": [_evaluation(row) for row in rows],
            "total": total,
            "page": page,
            "page_size": size,
            "total_pages": math.ceil(total / size),
        }

    def traces(
        self,
        api_key: bytes | None,
        page_token: str | None,
        page_size: int,
        start: float | None,
        end: float | None,
    ) -> dict[str, Any]:
        """``GET /api/v1/traces``: newest first, ``page_size`` at a time; ``ValueError`` for a
        ``page_token`` this server did not give out."""
        client = self._client_id(api_key) or ""
        # Plain bounds, so the (client, created) index serves a date filter.
        where = "client = ? AND created >= ? AND created <= ?"
        low, high = -math.inf if start is None else start, math.inf if end is None else end
        args: list[Any] = [client, low, high]
        if page_token is not None:
            created, trace_id = _read_token(page_token)
            where += " AND (created < ? OR (created = ? AND trace_id > ?))"
            args += [created, created, trace_id]
        with self._lock:
            self._flush()
            rows = self._db.execute(
                f"SELECT trace_id, created FROM history_traces WHERE {where} "
                "ORDER BY created DESC, trace_id LIMIT ?",
                [*args, page_size + 1],
            ).fetchall()
            traces = [self._trace(client, trace_id) for trace_id, _ in rows[:page_size]]
        last = rows[page_size - 1] if len(rows) > page_size else None
        return {
            "traces": [t for t in traces if t is not None],
            "next_page_token": None if last is None else _token(last[1], last[0]),
        }

    def trace(self, api_key: bytes | None, trace_id: str) -> dict[str, Any] | None:
        """``GET /api/v1/traces/{trace_id}``, or ``None`` when this key has no such trace."""
        with self._lock:
            self._flush()
            return self._trace(self._client_id(api_key) or "", trace_id)

    def _trace(self, client: str, trace_id: str) -> dict[str, Any] | None:
        row = self._db.execute(
            "SELECT created, tags, trace FROM history_traces WHERE client = ? AND trace_id = ?",
            (client, trace_id),
        ).fetchone()
        if row is None:
            return None
        evaluations = self._db.execute(
            "SELECT body FROM history_trace_evaluations WHERE client = ? AND trace_id = ? "
            "ORDER BY created, rowid",
            (client, trace_id),
        ).fetchall()
        return {
            "id": trace_id,
            "created_at": _iso(row[0]),
            "tags": json.loads(row[1]),
            "rating": None,
            "trace": json.loads(row[2]),
            "comments": [],
            "evaluations": [json.loads(body) for (body,) in evaluations],
        }

    def recorded(self, run: Runner) -> Runner:
        """``run`` noting every answer (and judge failure), written on the next :meth:`flush`."""

        async def record_run(request: RewardRequest | TraceRequest) -> dict[str, Any]:
            started, status, result = time.perf_counter(), 200, None
            try:
                result = await run(request)
                return result
            except Exception as exc:
                status = 502 if isinstance(exc, JudgeError) else 500
                raise
            finally:
                if status != 200 or result is not None:  # not cancelled
                    ms = (time.perf_counter() - started) * 1000.0
                    served = _Served(CALLER.get(), time.time(), request, status, ms, result)
                    with self._lock:
                        self._pending.append(served)

        return record_run

    async def keep_flushing(self, every: float = 0.25) -> None:
        """Write what was recorded, off the event loop, until cancelled."""
        while True:
            await asyncio.sleep(every)
            if self._pending:
                try:
                    await asyncio.to_thread(self.flush)
                except sqlite3.Error as exc:  # a locked or full disk: the rows wait
                    _log.warning("history write failed: %s", exc)

    def close(self) -> None:
        with self._lock:
            try:
                self._flush()
            finally:
                self._db.close()


def _trace_evaluations(
    request: RewardRequest | TraceRequest, result: dict[str, Any], keep: bool
) -> list[dict[str, Any]]:
    """A trace's entries for one answer: one per judged agent instance, or one for a reward."""
    criterion = request.evaluation_criteria or request.evaluator_name
    name = request.evaluator_name or criterion

    def entry(score: Any, explanation: Any, sub_trace: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "id": str(uuid.uuid4()),
            "evaluator_name": name,
            "score": score,
            "explanation": explanation if keep else None,
            "sub_trace": sub_trace if keep else None,
            "criteria": criterion,
            "sources": [],
            "cached": False,
        }

    if isinstance(request, RewardRequest):
        return [entry(result.get("score"), result.get("explanation"), None)]
    agents = request.trace.agent_instance_by_id
    out = []
    for by_name in (result.get("results_by_agent_name") or {}).values():
        for instance_id, verdict in (by_name.get("results_by_agent_instance_id") or {}).items():
            if verdict is None:
                continue
            agent = agents.get(instance_id)
            sub = None if agent is None else agent.model_dump(mode="json", exclude_none=True)
            out.append(entry(verdict.get("score"), verdict.get("explanation"), sub))
    return out


def _evaluation(row: tuple[Any, ...]) -> dict[str, Any]:
    eid, created, endpoint, status, latency, model, tags, request, response, tokens = row
    return {
        "id": eid,
        "email": None,
        "endpoint": endpoint,
        "status_code": status,
        "latency_ms": latency,
        "request_payload": None if request is None else json.loads(request),
        "response_payload": None if response is None else json.loads(response),
        "token_count": tokens,
        "domain": None,
        "created_at": _iso(created),
        "model_class": model,
        "tags": json.loads(tags),
    }


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat().replace("+00:00", "Z")


def _month(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m")


def _next_month(epoch: float) -> str:
    first = datetime.fromtimestamp(epoch, timezone.utc).replace(day=1)
    return _month((first + timedelta(days=31)).timestamp()) + "-01"


def _token(created: float, trace_id: str) -> str:
    raw = json.dumps([created, trace_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _read_token(token: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        created, trace_id = json.loads(raw)
        if isinstance(created, int | float) and isinstance(trace_id, str):
            return float(created), trace_id
    except (ValueError, TypeError):  # binascii.Error is a ValueError
        pass
    raise ValueError(
        "page_token: not a token this server gave out; pass the next_page_token of the previous "
        "page, or leave it out for the first page"
    )
