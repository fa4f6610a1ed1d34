"""Background evaluations: stored, run on the server's event loop, resumed after a restart."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from typing import Any

from pydantic import ValidationError

from composo._core.wire import RewardRequest, TraceRequest
from composo.server._history import Runner
from composo.server._store import KEEP_FINISHED_SECONDS, StoredTask, TaskStore

_log = logging.getLogger("composo.server")

_NOT_KEPT = (
    "the result was not kept: data_retention='none' keeps results in memory only, for a limited "
    "time and number of tasks, and this one has expired or the server has restarted since"
)
# In-memory results of data_retention="none" tasks: expire like those on disk, oldest out first.
KEEP_RESULTS_SECONDS = KEEP_FINISHED_SECONDS
MAX_KEPT_RESULTS = 10_000


class TaskManager:
    """Runs ``concurrency`` tasks at once, keeps its lease and takes over stopped servers' work."""

    def __init__(self, store: TaskStore, runner: Runner, concurrency: int = 32) -> None:
        self.store = store
        self._runner = runner
        self._slots = asyncio.Semaphore(concurrency)
        self._running: set[asyncio.Task[None]] = set()
        self._active: set[str] = set()
        self._results: dict[str, tuple[float, dict[str, Any]]] = {}
        self._keeper: asyncio.Task[None] | None = None

    async def submit(
        self,
        request: RewardRequest | TraceRequest,
        api_key: bytes | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """Accept ``request`` (on disk before this returns unless ``data_retention="none"``, in a
        worker thread); a repeated ``idempotency_key`` returns the task it first created."""
        task_id = str(uuid.uuid4())
        kind = "trace" if isinstance(request, TraceRequest) else "reward"
        keep = request.data_retention != "none"
        stored = request.model_dump_json(exclude_none=True) if keep else None
        digest = None if stored is None else hashlib.sha256(stored.encode()).hexdigest()
        client = self.store.client_id(api_key)
        got = await asyncio.to_thread(
            self.store.add, task_id, kind, stored, client, idempotency_key, digest
        )
        if got != task_id:
            return got  # a repeat: the first submission's task, already under way
        self._start(task_id, request)
        return task_id

    def start(self) -> None:
        """Resume what stopped servers left, then keep the lease."""
        self._take_over(self.store.claim())
        self._keeper = asyncio.get_running_loop().create_task(self._keep())

    def _take_over(self, tasks: list[StoredTask]) -> None:
        resumed = 0
        for task in tasks:
            request = None if task.task_id in self._active else self._load(task)
            if request is not None:
                self._start(task.task_id, request)
                resumed += 1
        if resumed:
            _log.info("resumed %d background task(s) left unfinished", resumed)

    async def _keep(self) -> None:
        """Renew the lease a few times a period, and pick up expired work."""
        period = max(0.2, self.store.lease_seconds / 3)
        while True:
            await asyncio.sleep(period)
            try:
                await asyncio.to_thread(self.store.renew)
                self._take_over(await asyncio.to_thread(self.store.claim))
            except Exception as exc:  # a locked or full disk: try again next period
                _log.warning("task lease upkeep failed: %s", exc)

    def _load(self, task: StoredTask) -> RewardRequest | TraceRequest | None:
        model = TraceRequest if task.kind == "trace" else RewardRequest
        try:
            return model.model_validate_json(task.request or "")
        except ValidationError as exc:
            self.store.finish(task.task_id, None, f"stored request no longer valid: {exc}")
            return None

    def _start(self, task_id: str, request: RewardRequest | TraceRequest) -> None:
        self._active.add(task_id)
        t = asyncio.get_running_loop().create_task(self._run(task_id, request))
        self._running.add(t)
        t.add_done_callback(self._running.discard)

    async def _run(self, task_id: str, request: RewardRequest | TraceRequest) -> None:
        try:
            async with self._slots:
                if not await asyncio.to_thread(self.store.start, task_id):
                    return  # finished, or taken over by another server: never judged twice here
                try:
                    result = await self._runner(request)
                except Exception as exc:
                    _log.warning("background task %s failed: %s", task_id, type(exc).__name__)
                    error = str(exc) or type(exc).__name__
                    await asyncio.to_thread(self.store.finish, task_id, None, error)
                else:
                    criterion = request.evaluation_criteria or request.evaluator_name
                    result = {**result, "criterion": criterion}
                    if request.data_retention == "none":
                        self._results[task_id] = (time.monotonic(), result)
                        self._prune_results()
                    await asyncio.to_thread(self.store.finish, task_id, result, None)
        finally:
            self._active.discard(task_id)

    async def info(self, task_id: str, api_key: bytes | None = None) -> dict[str, Any] | None:
        """``GET /api/v1/evals/tasks/{task_id}``; ``None`` if unknown or another key's."""
        task = await asyncio.to_thread(self.store.get, task_id)
        if task is None or task.client not in (None, self.store.client_id(api_key)):
            return None
        body: dict[str, Any] = {"task_id": task_id, "status": task.status}
        if task.status == "succeeded":
            self._prune_results()
            kept = self._results.get(task_id)
            result = task.result if task.retain else None if kept is None else kept[1]
            if result is None:
                return {"task_id": task_id, "status": "failed", "error": _NOT_KEPT}
            body["result"] = result
        elif task.status == "failed":
            body["error"] = task.error
        return body

    def _prune_results(self) -> None:
        """Drop expired in-memory results, then the oldest beyond the bound (finish order)."""
        expired = time.monotonic() - KEEP_RESULTS_SECONDS
        while self._results:
            task_id, (finished, _) = next(iter(self._results.items()))
            if finished >= expired and len(self._results) <= MAX_KEPT_RESULTS:
                break
            del self._results[task_id]

    async def aclose(self) -> None:
        """Stop running tasks and hand the unfinished ones to the next server start."""
        stopping = [*self._running, *([self._keeper] if self._keeper else [])]
        for t in stopping:
            t.cancel()
        await asyncio.gather(*stopping, return_exceptions=True)
        self.store.release_unfinished()
