"""Evaluations that run beside the user's program instead of inside it.

Framework hooks (a LangChain callback, a LlamaIndex handler, a tracer) must return in microseconds,
so they hand work to a :class:`BackgroundEvaluator`: one daemon thread runs an event loop with one
long-running batch (the async batch engine, fed by the submitted jobs as they arrive), and every
outcome becomes an :class:`EvaluationRecord`.
Failures are recorded and logged, never raised into the caller; :meth:`BackgroundEvaluator.flush`
waits for what is pending. The backlog is bounded, so a slow server cannot grow memory without
limit: what does not fit is recorded as an error, not dropped silently.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import itertools
import logging
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from composo._core.async_client import AsyncComposo
from composo._core.batch_async import ASend, astream
from composo._core.client import Composo
from composo._core.options import OPTION_NAMES
from composo._core.plan import BatchResult, Job, Plan
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

    Args:
        criteria: The criterion (or list) every submitted run is evaluated against, checked
            here before anything runs (or give ``evaluator_name``).
        evaluator_name: Saved evaluator name(s), instead of ``criteria``.
        client: A :class:`Composo` (its calls run on a small thread pool) or an
            :class:`AsyncComposo` (awaited on this evaluator's own loop, so do not share it
            with another loop); by default an ``AsyncComposo`` built from ``COMPOSO_API_KEY``
            / ``COMPOSO_BASE_URL``.
        on_result: Sees every record as it arrives (on the background thread; a skip, in the
            submitting one).
        max_results: How many of the newest records :attr:`results` keeps (``None``: all).
        max_pending: Evaluations allowed to wait; a run that does not fit is recorded as a
            :class:`BacklogFullError`, not dropped silently.
        options: :class:`~composo.types.EvaluateOptions` for every evaluation (``tags``,
            ``model_core``...); any other key is added to every submitted run's arguments.
        name: The background thread's name, also used in log lines.

    Raises:
        ComposoValidationError: The criteria, options or limits are unusable.
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
        given = dict(options or {})
        evaluate_options = {k: v for k, v in given.items() if k in OPTION_NAMES}
        self._plan = Plan.create(criteria, evaluator_name, evaluate_options)
        self.criteria: list[str] = list(self._plan.criteria)
        self._extra = {k: v for k, v in given.items() if k not in OPTION_NAMES}
        if client is not None and not isinstance(client, (Composo, AsyncComposo)):
            raise ComposoValidationError(
                "client: expected a composo.Composo or composo.AsyncComposo, "
                f"got {type(client).__name__}"
            )
        if not isinstance(max_pending, int) or max_pending < 1:
            raise ComposoValidationError(f"max_pending: must be at least 1, got {max_pending!r}")
        if max_pending < len(self.criteria):
            # Each run queues one evaluation per criterion: fewer places would skip every run.
            raise ComposoValidationError(
                f"max_pending: {max_pending} is fewer than the {len(self.criteria)} criteria "
                "evaluated for each run; nothing could ever be evaluated (raise max_pending)"
            )
        if max_results is not None and max_results < 0:
            raise ComposoValidationError(
                f"max_results: must be 0 or more (None keeps all), got {max_results!r}"
            )
        self._owns_client = client is None
        self._client: Composo | AsyncComposo = client if client is not None else AsyncComposo()
        self._on_result = on_result
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
        self._pump: concurrent.futures.Future[None] | None = None
        # Jobs waiting for the engine; the loop is woken once per batch of jobs, not per job.
        self._inbox: collections.deque[_Job] = collections.deque()
        self._wake_pending = False
        self._wake: asyncio.Event | None = None
        # Jobs handed to the engine, by position, with how many of their results are still due.
        self._running: dict[int, tuple[_Job, int]] = {}
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

        Args:
            run_id: What the records of this run are filed under.
            kind: ``"evaluate"`` or ``"evaluate_trace"``.
            prepare: Runs on the background thread and returns the run's arguments for
                ``evaluate`` (``messages``, ``result``, ``tools``...) or ``evaluate_trace``
                (``trace``): converting is deferred until a request can go.
            metadata: Kept on each record.

        Returns:
            ``False`` (the skip recorded as an error) when the backlog is full, else ``True``.

        Raises:
            RuntimeError: The evaluator is closed.
        """
        if self._closed:
            raise RuntimeError(f"{self._name} is closed")
        job = _Job(run_id, kind, prepare, dict(metadata or {}))
        n = len(self.criteria)
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
            for criterion in self.criteria:
                self._record(job, criterion, error=err, pending=False)
            return False
        loop = self._ensure_loop()
        self._inbox.append(job)
        self._wake_up(loop)
        return True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until nothing is pending.

        Args:
            timeout: Seconds to wait at most (``None``: as long as it takes).

        Returns:
            ``False`` if ``timeout`` passed first.
        """
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
            fut = asyncio.run_coroutine_threadsafe(self._stop(), loop)
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
                self._pump = asyncio.run_coroutine_threadsafe(self._run(), new_loop)
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

    def _wake_up(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._cond:
            wake, self._wake_pending = not self._wake_pending, True
        if wake:
            loop.call_soon_threadsafe(self._woken)

    def _woken(self) -> None:
        with self._cond:
            self._wake_pending = False
        if self._wake is not None:
            self._wake.set()

    def _send(self) -> ASend:
        client = self._client
        if isinstance(client, AsyncComposo):
            return client._send
        pool = self._threads = ThreadPoolExecutor(
            max_workers=client.max_concurrent_requests, thread_name_prefix=self._name
        )

        def send(request: Any) -> asyncio.Future[Any]:
            return asyncio.get_running_loop().run_in_executor(pool, client._send, request)

        return send

    async def _run(self) -> None:
        """The one batch this evaluator runs: every submitted job, as it arrives."""
        self._wake = asyncio.Event()
        window = self._client.max_concurrent_requests
        try:
            async for _ in astream(
                self._send(), self._jobs(), self._plan, window, None, self._done
            ):
                pass
        except Exception:
            _log.exception("%s: the evaluation loop stopped", self._name)

    async def _jobs(self) -> AsyncIterator[Job]:
        assert self._wake is not None
        for index in itertools.count():
            while not self._inbox:
                if self._closed:
                    return
                self._wake.clear()
                await self._wake.wait()
            job = self._inbox.popleft()
            try:
                # Converted only when the engine asks for the next item: a backlog costs no CPU.
                item = {**self._extra, **job.prepare()}
            except Exception as exc:
                _log.warning("could not prepare run %s for evaluation: %s", job.run_id, exc)
                for criterion in self.criteria:
                    self._record(job, criterion, error=exc)
                continue
            self._running[index] = (job, len(self.criteria))
            yield Job(index, item)

    def _done(self, result: BatchResult) -> None:
        job, left = self._running[result.index]
        if left > 1:
            self._running[result.index] = (job, left - 1)
        else:
            del self._running[result.index]
        if result.error is not None:
            _log.warning(
                "evaluation of run %s against %r failed: %s",
                job.run_id,
                result.criterion,
                result.error,
            )
        self._record(job, result.criterion, response=result.response, error=result.error)

    async def _stop(self) -> None:
        self._woken()
        if self._pump is not None:
            await asyncio.wrap_future(self._pump)
        if self._owns_client and isinstance(self._client, AsyncComposo):
            await self._client.aclose()

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
