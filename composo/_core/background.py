"""Evaluations that run beside the user's program instead of inside it.

Framework hooks (a LangChain callback, a LlamaIndex handler, a tracer) must return in microseconds,
so they hand work to a :class:`BackgroundEvaluator`: one daemon thread runs an event loop, each
submitted job is converted and sent there, and every outcome becomes an :class:`EvaluationRecord`.
Failures are recorded and logged, never raised into the caller; :meth:`BackgroundEvaluator.flush`
waits for what is pending. The backlog is bounded, so a slow server cannot grow memory without
limit: what does not fit is recorded as an error, not dropped silently.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import functools
import logging
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from composo._core.async_client import AsyncComposo
from composo._core.build import normalize_criteria
from composo._core.client import Composo
from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse
from composo.errors import ComposoError, ComposoValidationError

__all__ = ["BackgroundEvaluator", "BacklogFullError", "EvaluationRecord", "Kind"]

_log = logging.getLogger("composo")

Kind = Literal["evaluate", "evaluate_trace"]
Response = EvaluationResponse | MultiAgentTraceResponse


class BacklogFullError(ComposoError):
    """The evaluation was skipped: ``max_pending`` evaluations were already waiting."""


@dataclass(frozen=True)
class EvaluationRecord:
    """The outcome of one evaluation (one criterion on one run).

    ``score`` and ``explanation`` come from ``response`` (for a trace, its ``overall_score``);
    when the evaluation failed, ``error`` holds the exception and ``response`` is ``None``.
    """

    run_id: str
    criterion: str
    score: float | None = None
    explanation: str | None = None
    error: BaseException | None = None
    response: Response | None = None
    kind: Kind = "evaluate"
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None


Prepare = Callable[[], Mapping[str, Any]]


@dataclass(frozen=True)
class _Job:
    run_id: str
    kind: Kind
    prepare: Prepare
    metadata: Mapping[str, Any]


class BackgroundEvaluator:
    """Run evaluations on a background event loop and keep their records.

    ``client`` is a :class:`Composo` (its calls run on a small thread pool) or an
    :class:`AsyncComposo` (awaited on this evaluator's own loop, so do not share it with another
    loop); by default an ``AsyncComposo`` is built from ``COMPOSO_API_KEY`` / ``COMPOSO_BASE_URL``.
    ``criteria`` (or ``evaluator_name``) is checked here, before anything runs. ``options`` are
    passed to every ``evaluate`` / ``evaluate_trace`` call (``tags``, ``model_core``...).
    ``results`` keeps the newest ``max_results`` records (``None``: all of them); ``on_result``
    sees every record as it arrives (on the background thread; a skip, in the submitting one).
    """

    def __init__(
        self,
        criteria: str | Sequence[str] | None = None,
        *,
        evaluator_name: str | Sequence[str] | None = None,
        client: Composo | AsyncComposo | None = None,
        on_result: Callable[[EvaluationRecord], Any] | None = None,
        max_results: int | None = 1000,
        max_pending: int = 1000,
        options: Mapping[str, Any] | None = None,
        name: str = "composo-background",
    ) -> None:
        sources, _ = normalize_criteria(criteria, evaluator_name)
        self._sources = sources
        self.criteria: list[str] = [next(iter(s.values())) for s in sources]
        if client is not None and not isinstance(client, (Composo, AsyncComposo)):
            raise ComposoValidationError(
                "client: expected a composo.Composo or composo.AsyncComposo, "
                f"got {type(client).__name__}"
            )
        if not isinstance(max_pending, int) or max_pending < 1:
            raise ComposoValidationError(f"max_pending: must be at least 1, got {max_pending!r}")
        if max_pending < len(sources):
            # Each run queues one evaluation per criterion: fewer places would skip every run.
            raise ComposoValidationError(
                f"max_pending: {max_pending} is fewer than the {len(sources)} criteria evaluated "
                "for each run; nothing could ever be evaluated (raise max_pending)"
            )
        if max_results is not None and max_results < 0:
            raise ComposoValidationError(
                f"max_results: must be 0 or more (None keeps all), got {max_results!r}"
            )
        self._owns_client = client is None
        self._client: Composo | AsyncComposo = client if client is not None else AsyncComposo()
        self._on_result = on_result
        self._options = dict(options or {})
        self._name = name
        self.max_pending = max_pending
        self._results: collections.deque[EvaluationRecord] = collections.deque(maxlen=max_results)
        self._errors: collections.deque[EvaluationRecord] = collections.deque(maxlen=100)
        self._cond = threading.Condition()
        self._pending = 0
        self._completed = 0
        self._failed = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._threads: ThreadPoolExecutor | None = None
        self._tasks: set[asyncio.Future[None]] = set()
        # Jobs waiting for the loop; the loop is woken once per batch, not once per job.
        self._inbox: collections.deque[_Job] = collections.deque()
        self._wake_pending = False
        # Requests wait for a slot here, so a client's timeout only starts once its request can go.
        self._slots: asyncio.Semaphore | None = None
        self._closed = False
        self._skipped = 0
        _live.add(self)

    # -- what callers see ---------------------------------------------------------------------

    @property
    def results(self) -> list[EvaluationRecord]:
        """The newest records, oldest first (a copy)."""
        with self._cond:
            return list(self._results)

    @property
    def pending(self) -> int:
        """Evaluations submitted and not finished yet."""
        return self._pending

    @property
    def stats(self) -> dict[str, int]:
        """Counts since creation: ``completed``, ``failed`` (errors and skipped) and ``pending``."""
        with self._cond:
            return {"completed": self._completed, "failed": self._failed, "pending": self._pending}

    def take_errors(self) -> list[EvaluationRecord]:
        """Failed records not taken before (for callers that re-raise them), oldest first."""
        with self._cond:
            out = list(self._errors)
            self._errors.clear()
            return out

    def submit(
        self,
        run_id: str,
        kind: Kind,
        prepare: Prepare,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        """Queue one evaluation per criterion; returns at once.

        ``prepare`` runs on the background thread and returns the keyword arguments for
        ``evaluate`` (``messages``, ``result``, ``tools``...) or ``evaluate_trace`` (``trace``).
        Returns ``False`` (and records the skip as an error) when the backlog is full.
        """
        if self._closed:
            raise RuntimeError(f"{self._name} is closed")
        job = _Job(run_id, kind, prepare, dict(metadata or {}))
        n = len(self._sources)
        with self._cond:
            full = self._pending + n > self.max_pending
            if not full:
                self._pending += n
        if full:
            self._skipped += 1
            if self._skipped in (1, 10, 100) or self._skipped % 1000 == 0:
                _log.warning(
                    "%s: %d run(s) not evaluated so far because %d evaluations were pending",
                    self._name,
                    self._skipped,
                    self.max_pending,
                )
            err = BacklogFullError(
                f"evaluation skipped: {self.max_pending} evaluations are already pending; "
                "the server is slower than the runs (raise max_pending, or call flush())"
            )
            for src in self._sources:
                self._record(job, self._criterion(src), error=err, pending=False)
            return False
        loop = self._ensure_loop()
        self._inbox.append(job)
        with self._cond:
            wake, self._wake_pending = not self._wake_pending, True
        if wake:
            loop.call_soon_threadsafe(self._drain)
        return True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until nothing is pending; ``False`` if ``timeout`` seconds passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending == 0, timeout)

    async def aflush(self, timeout: float | None = None) -> bool:
        """:meth:`flush` for async code (waits on a worker thread, not on the event loop)."""
        return await asyncio.to_thread(self.flush, timeout)

    def close(self, timeout: float | None = 5.0) -> None:
        """Wait up to ``timeout`` for pending work, then stop the thread and close owned clients."""
        if self._closed:
            return
        if not self.flush(timeout):
            _log.warning(
                "%s: closing with %d evaluation(s) unfinished; they are dropped",
                self._name,
                self._pending,
            )
        self._closed = True
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None:
            if self._owns_client and isinstance(self._client, AsyncComposo):
                fut = asyncio.run_coroutine_threadsafe(self._client.aclose(), loop)
                try:
                    fut.result(timeout)
                except Exception as exc:  # closing is best effort
                    _log.debug("closing the evaluation client failed: %s", exc)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout)
        if self._threads is not None:
            self._threads.shutdown(wait=False)
        if self._owns_client and isinstance(self._client, Composo):
            self._client.close()

    # -- the background side --------------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is not None:
            return loop
        with self._cond:
            if self._loop is None:
                new_loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(
                    target=self._serve, args=(new_loop, ready), name=self._name, daemon=True
                )
                thread.start()
                ready.wait()
                self._thread = thread
                self._loop = new_loop
            return self._loop

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            loop.close()

    def _drain(self) -> None:
        with self._cond:
            self._wake_pending = False
        inbox = self._inbox
        while inbox:
            task = asyncio.ensure_future(self._run(inbox.popleft()))
            # Keep a reference until done, as asyncio only holds tasks weakly.
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _slot_semaphore(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._client.max_concurrent_requests)
        return self._slots

    async def _run(self, job: _Job) -> None:
        try:
            # Converted only when a request can go: a backlog costs no CPU until then.
            async with self._slot_semaphore():
                kwargs = dict(job.prepare())
        except Exception as exc:
            _log.warning("could not prepare run %s for evaluation: %s", job.run_id, exc)
            for src in self._sources:
                self._record(job, self._criterion(src), error=exc)
            return
        await asyncio.gather(*(self._one(job, src, kwargs) for src in self._sources))

    async def _one(self, job: _Job, source: Mapping[str, str], kwargs: Mapping[str, Any]) -> None:
        criterion = self._criterion(source)
        call: dict[str, Any] = {**self._options, **kwargs}
        if "evaluation_criteria" in source:
            call["criteria"] = criterion
        else:
            call["evaluator_name"] = criterion
        try:
            async with self._slot_semaphore():
                response = await self._call(job.kind, call)
        except Exception as exc:
            _log.warning("evaluation of run %s against %r failed: %s", job.run_id, criterion, exc)
            self._record(job, criterion, error=exc)
            return
        self._record(job, criterion, response=response)

    async def _call(self, kind: Kind, call: dict[str, Any]) -> Response:
        client = self._client
        if isinstance(client, AsyncComposo):
            out: Response = await getattr(client, kind)(**call)
            return out
        if self._threads is None:
            self._threads = ThreadPoolExecutor(
                max_workers=client.max_concurrent_requests, thread_name_prefix=self._name
            )
        loop = asyncio.get_running_loop()
        result: Response = await loop.run_in_executor(
            self._threads, functools.partial(getattr(client, kind), **call)
        )
        return result

    @staticmethod
    def _criterion(source: Mapping[str, str]) -> str:
        return next(iter(source.values()))

    def _record(
        self,
        job: _Job,
        criterion: str,
        *,
        response: Response | None = None,
        error: BaseException | None = None,
        pending: bool = True,
    ) -> None:
        if isinstance(response, MultiAgentTraceResponse):
            score, explanation = response.overall_score, response.explanation
        elif response is not None:
            score, explanation = response.score, response.explanation
        else:
            score, explanation = None, None
        record = EvaluationRecord(
            run_id=job.run_id,
            criterion=criterion,
            score=score,
            explanation=explanation,
            error=error,
            response=response,
            kind=job.kind,
            metadata=job.metadata,
        )
        with self._cond:
            self._results.append(record)
            if error is None:
                self._completed += 1
            else:
                self._failed += 1
                self._errors.append(record)
        # The record is visible before on_result runs, and flush() returns only after it ran.
        if self._on_result is not None:
            try:
                self._on_result(record)
            except Exception:
                _log.exception("on_result raised for run %s; the record is kept", job.run_id)
        if pending:
            with self._cond:
                self._pending -= 1
                if self._pending == 0:
                    self._cond.notify_all()


_live: weakref.WeakSet[BackgroundEvaluator] = weakref.WeakSet()


@atexit.register
def _warn_unfinished() -> None:
    """Evaluations still queued at exit are lost; say so rather than losing them silently."""
    for evaluator in list(_live):
        if evaluator.pending and not evaluator._closed:
            _log.warning(
                "%s: %d evaluation(s) were still pending at exit and are lost; call flush() "
                "before the program ends",
                evaluator._name,
                evaluator.pending,
            )
