"""Evaluations beside the user's program (framework hooks must return in microseconds): one
daemon thread's event loop serves every evaluator of the process, each running the async batch
engine on it only while it has work. Failures and a full backlog become records, never raises.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import itertools
import logging
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from composo._async_client import AsyncComposo
from composo._client import Composo
from composo._core import forks
from composo._core.batch_async import ASend, astream
from composo._core.options import OPTION_NAMES
from composo._core.plan import BatchResult, Job, Plan
from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse
from composo._core.wire import CRITERION_PREFIXES
from composo._siblings import check_client
from composo.errors import ComposoError, ComposoValidationError

_log = logging.getLogger("composo")

Kind = Literal["evaluate", "evaluate_trace"]
Response = EvaluationResponse | MultiAgentTraceResponse


class BacklogFullError(ComposoError):
    """The evaluation was skipped: ``max_pending`` evaluations were already waiting."""


@dataclass(frozen=True)
class EvaluationRecord:
    """The outcome of one evaluation (one criterion on one run), and what was evaluated.

    ``score`` and ``explanation`` come from ``response`` (for a trace, its ``overall_score``);
    when the evaluation failed, ``error`` holds the exception and ``response`` is ``None``.
    ``name`` is the run's name (for a trace, its root agent), ``summary`` one line on what was
    sent, and ``evaluated`` the arguments the request was built from (the same objects, not
    copies); both are ``None`` when the run could not be prepared or was skipped.
    """

    run_id: str
    criterion: str
    score: float | None = None
    explanation: str | None = None
    error: BaseException | None = None
    response: Response | None = None
    kind: Kind = "evaluate"
    metadata: Mapping[str, Any] = field(default_factory=dict)
    name: str | None = None
    summary: str | None = None
    evaluated: Mapping[str, Any] | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """Whether the evaluation finished (a ``None`` score, "not applicable", is ok)."""
        return self.error is None

    @property
    def criterion_kind(self) -> CriterionKind:
        """``"reward"``, ``"penalize"``, ``"passes_if"``, ``"fails_if"`` (0 or 1) or
        ``"evaluator"`` (a saved evaluator's name)."""
        return criterion_kind(self.criterion)


CriterionKind = Literal["reward", "penalize", "passes_if", "fails_if", "evaluator"]


def criterion_kind(criterion: str) -> CriterionKind:
    """Which kind of criterion ``criterion`` is (by its prefix, as the platform reads it)."""
    head = criterion[:9].lower()
    for prefix in CRITERION_PREFIXES:
        if head.startswith(prefix.lower()):
            return cast(CriterionKind, prefix.lower().replace(" ", "_"))
    return "evaluator"


_SHORT = 80


def _short(text: Any) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= _SHORT else flat[: _SHORT - 3] + "..."


def _text_of(message: Any) -> str:
    if not isinstance(message, Mapping):
        return _short(message)
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = " ".join(
            str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("text")
        )
    calls = message.get("tool_calls")
    if not content and calls:
        names = [
            str((c.get("function") or {}).get("name", "?")) for c in calls if isinstance(c, Mapping)
        ]
        return "calls " + ", ".join(names)
    return _short(content or "")


def summarize(kind: Kind, item: Mapping[str, Any]) -> str | None:
    """One line about what an evaluation was given: cheap, it reads only a few fields."""
    try:
        return _trace_line(item.get("trace")) if kind == "evaluate_trace" else _chat_line(item)
    except Exception:  # a summary is a courtesy; never fail a record over it
        return None


def _trace_line(trace: Any) -> str | None:
    agents = getattr(trace, "agent_instance_by_id", None)
    if not isinstance(agents, Mapping):
        return None
    names = list(dict.fromkeys(a.name for a in agents.values()))
    steps = sum(len(a.interactions) for a in agents.values())
    return f"trace of {len(agents)} agent instance(s) ({', '.join(names)}), {steps} step(s)"


def _chat_line(item: Mapping[str, Any]) -> str | None:
    messages, result = item.get("messages"), item.get("result")
    question = answer = None
    if isinstance(messages, Sequence) and not isinstance(messages, str):
        users = [m for m in messages if isinstance(m, Mapping) and m.get("role") == "user"]
        question = _text_of(users[-1]) if users else None
    if isinstance(result, Sequence) and result:  # the answer's text, or its last message
        answer = _text_of(result if isinstance(result, str) else result[-1])
    parts = [f"user: {question}" if question else "", f"answer: {answer}" if answer else ""]
    return " | ".join(p for p in parts if p) or None


Prepare = Callable[[], Mapping[str, Any]]


@dataclass
class _Job:
    """One submitted run and, once the engine takes it, its arguments and their summary."""

    run_id: str
    kind: Kind
    prepare: Prepare
    metadata: Mapping[str, Any]
    name: str | None
    left: int  # results still due
    item: Mapping[str, Any] | None = None
    summary: str | None = None

    def outcome(self, result: BatchResult) -> EvaluationRecord:
        return EvaluationRecord(
            run_id=self.run_id,
            criterion=result.criterion,
            score=result.score,  # a trace's overall score
            explanation=result.explanation,
            error=result.error,
            response=result.response,
            kind=self.kind,
            metadata=self.metadata,
            name=self.name,
            summary=self.summary,
            evaluated=self.item,
        )


class _Worker:
    """The process's background thread and event loop, started on first use; blocking clients'
    calls go to the loop's default executor."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._after_fork()
        forks.register(self)

    def _after_fork(self) -> None:  # a child has the parent's loop but not its thread or lock
        forks.leave_behind(self._loop)
        self._lock = threading.Lock()
        self._loop = None
        self._thread: threading.Thread | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        running = self.running_loop()
        if running is not None:  # the usual case, without the lock
            return running
        with self._lock:
            loop = self.running_loop()
            if loop is None:
                loop = self._loop = asyncio.new_event_loop()
                loop.set_default_executor(
                    ThreadPoolExecutor(POOL_THREADS, thread_name_prefix=WORKER_NAME)
                )
                # Work handed to the loop before it runs waits for it.
                self._thread = threading.Thread(
                    target=loop.run_forever, name=WORKER_NAME, daemon=True
                )
                self._thread.start()
            return loop

    def running_loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop, if its thread runs."""
        thread = self._thread
        return self._loop if thread is not None and thread.is_alive() else None


WORKER_NAME = "composo-background"
POOL_THREADS = 32
_worker = _Worker()


def _close_owned(client: AsyncComposo) -> None:
    """A dropped evaluator's own client closed on the loop (a finalizer: never blocks)."""
    loop = _worker.running_loop()
    if loop is not None:
        with contextlib.suppress(RuntimeError):  # the loop is closed (interpreter exit)
            loop.call_soon_threadsafe(_aclose_soon, client)


def _aclose_soon(client: AsyncComposo) -> None:
    task = asyncio.get_running_loop().create_task(client.aclose())
    _closing.add(task)
    task.add_done_callback(_closing.discard)


_closing: set[asyncio.Task[None]] = set()


class BackgroundEvaluator:
    """Run evaluations on the process's background event loop and keep their records.

    One daemon thread serves every evaluator in the process, and an evaluator holds nothing on
    it while idle: an evaluator made per request and dropped (without :meth:`close`) is
    collected, and its own client closed. ``with BackgroundEvaluator(...) as ev:`` flushes and
    closes on exit.

    Args:
        criteria: The criterion (or list) every submitted run is evaluated against, checked
            here before anything runs (or give ``evaluator_name``).
        evaluator_name: Saved evaluator name(s), instead of ``criteria``.
        client: A :class:`Composo` (its calls run on a shared, bounded thread pool) or an
            :class:`AsyncComposo` (awaited on the background loop, so do not use it from
            another loop too); by default an ``AsyncComposo`` built from ``COMPOSO_API_KEY`` /
            ``COMPOSO_BASE_URL``, closed with this evaluator.
        on_result: Sees every record as it arrives (on the background thread; a skip, in the
            submitting one).
        max_results: How many of the newest records :attr:`results` keeps (``None``: all).
        max_pending: Evaluations allowed to wait; a run that does not fit is recorded as a
            :class:`BacklogFullError`, not dropped silently.
        options: :class:`~composo.types.EvaluateOptions` for every evaluation (``tags``,
            ``model_core``...); any other key is added to every submitted run's arguments.
        name: Used in log lines and error messages.

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
        if client is not None:
            check_client(client)
        given = dict(options or {})
        evaluate_options = {k: v for k, v in given.items() if k in OPTION_NAMES}
        if evaluate_options.get("model_core") is None and client is not None:
            evaluate_options["model_core"] = client.model_core  # as the client's calls have
        self._plan = Plan.create(criteria, evaluator_name, evaluate_options)
        self.criteria: list[str] = list(self._plan.criteria)
        self._extra = {k: v for k, v in given.items() if k not in OPTION_NAMES}
        _check_limits(max_pending, max_results, len(self.criteria))
        self._owns_client = client is None
        self._client: Composo | AsyncComposo = client if client is not None else AsyncComposo()
        self._on_result = on_result
        self._name = name
        self.max_pending = max_pending
        self._results: collections.deque[EvaluationRecord] = collections.deque(maxlen=max_results)
        self._errors: collections.deque[EvaluationRecord] = collections.deque(maxlen=100)
        self._completed = self._failed = self._skipped = 0
        self._fresh()
        self._closed = self._exiting = False
        self._finalizer = (
            weakref.finalize(self, _close_owned, self._client)
            if isinstance(self._client, AsyncComposo) and self._owns_client
            else None
        )
        _live.add(self)
        forks.register(self)

    def _fresh(self) -> None:
        """Nothing pending, queued or in flight (in a forked child too: what the parent had
        pending stays the parent's, its loop and threads do not exist here)."""
        self._cond = threading.Condition()
        self._pending = 0
        # The batch running while there is work (set and cleared on the loop, under _cond).
        self._pump: asyncio.Task[None] | None = None
        # Jobs waiting for the engine; the loop is woken once per batch of jobs, not per job.
        self._inbox: collections.deque[_Job] = collections.deque()
        self._wake_pending = False
        self._wake = asyncio.Event()
        # Jobs handed to the engine, by position.
        self._running: dict[int, _Job] = {}

    _after_fork = _fresh

    def __enter__(self) -> BackgroundEvaluator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close(None)

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
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

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
        *,
        name: str | None = None,
    ) -> bool:
        """Queue one evaluation per criterion; returns at once.

        Args:
            run_id: What the records of this run are filed under.
            kind: ``"evaluate"`` or ``"evaluate_trace"``.
            prepare: Runs on the background thread and returns the run's arguments for
                ``evaluate`` (``messages``, ``result``, ``tools``...) or ``evaluate_trace``
                (``trace``): converting is deferred until a request can go. If it raises, the
                run is recorded as failed (one record per criterion) and logged as a warning.
            metadata: Kept on each record.
            name: The run's name, kept on each record (default: ``metadata["name"]``).

        Returns:
            ``False`` (the skip recorded as an error) when the backlog is full, else ``True``.

        Raises:
            RuntimeError: The evaluator is closed.
        """
        if self._closed:
            raise RuntimeError(f"{self._name} is closed")
        meta = dict(metadata or {})
        if name is None and isinstance(meta.get("name"), str):
            name = meta["name"]
        job = _Job(run_id, kind, prepare, meta, name, len(self.criteria))
        with self._cond:
            full = self._pending + job.left > self.max_pending
            if not full:
                self._pending += job.left
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
                self._record(job.outcome(BatchResult(0, criterion, error=err)), pending=False)
            return False
        loop = _worker.loop()
        self._inbox.append(job)
        with self._cond:  # one wake-up for every job queued until the loop runs it
            wake, self._wake_pending = not self._wake_pending, True
        if wake:
            loop.call_soon_threadsafe(self._woken)
        return True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until nothing is pending.

        Args:
            timeout: Seconds to wait at most (``None``: as long as it takes).

        Returns:
            ``False`` if ``timeout`` passed first.
        """
        with self._cond:
            # Until the batch has ended too, so nothing on the loop refers to this evaluator.
            return self._cond.wait_for(lambda: self._pending == 0 and self._pump is None, timeout)

    async def aflush(self, timeout: float | None = None) -> bool:
        """:meth:`flush` for async code (waits on a worker thread, not on the event loop)."""
        return await asyncio.to_thread(self.flush, timeout)

    def close(self, timeout: float | None = 5.0) -> None:
        """Wait up to ``timeout`` for pending work, then stop and close the client made here.

        Args:
            timeout: Seconds to wait at most (``None``: as long as it takes); what is still
                pending then is dropped, with a warning.
        """
        if self._closed:
            return
        if not self.flush(timeout):
            _log.warning(
                "%s: closing with %d evaluation(s) unfinished; they are dropped",
                self._name,
                self._pending,
            )
        self._closed = True
        if self._finalizer is not None:
            self._finalizer.detach()
        loop = _worker.running_loop()
        if loop is not None and (self._pump is not None or self._owns_client):
            fut = asyncio.run_coroutine_threadsafe(self._stop(), loop)
            try:
                fut.result(timeout)
            except Exception as exc:  # closing is best effort
                _log.debug("closing the evaluation client failed: %s", exc)

    async def aclose(self, timeout: float | None = 5.0) -> None:
        """:meth:`close` for async code (waits on a worker thread, not on the event loop)."""
        await asyncio.to_thread(self.close, timeout)

    # -- the background side (everything below runs on the background loop) ----------------------

    def _woken(self) -> None:
        """Start a batch for the queued jobs, or wake the running one."""
        with self._cond:
            self._wake_pending = False
            if self._pump is None and self._inbox and not self._exiting:
                self._wake = asyncio.Event()  # of this loop (a new one, if the last one died)
                self._pump = asyncio.get_running_loop().create_task(self._run())
                self._pump.add_done_callback(self._pump_done)
        self._wake.set()

    def _pump_done(self, task: asyncio.Task[None]) -> None:
        with self._cond:
            self._pump = None
            self._cond.notify_all()
        if not self._closed:  # a job that came while the last batch was ending starts the next
            self._woken()

    def _sender(self) -> ASend:
        """The client's public ``send``: awaited, or run on the loop's executor threads."""
        client = self._client
        if isinstance(client, AsyncComposo):
            return client.send
        loop = asyncio.get_running_loop()

        def send(request: Any) -> asyncio.Future[Any]:
            try:
                return loop.run_in_executor(None, client.send, request)
            except RuntimeError:
                # The interpreter is exiting and its executors take no more work: take no more
                # jobs either; what is left stays pending, for the warning at exit.
                self._exiting = True
                raise

        return send

    async def _run(self) -> None:
        """One batch: the submitted jobs as they arrive, until there is nothing left to do."""
        window = self._client.max_concurrent_requests
        try:
            async for _ in astream(
                self._sender(), self._jobs(), self._plan, window, None, self._done
            ):
                pass
        except Exception:
            _log.exception("%s: the evaluation loop stopped", self._name)

    async def _jobs(self) -> AsyncIterator[Job]:
        for index in itertools.count():
            if self._exiting:
                return
            while not self._inbox:
                # Idle (nothing queued, nothing in flight): end the batch, so nothing on the
                # loop refers to this evaluator until the next submit.
                if self._closed or not self._running:
                    return
                self._wake.clear()
                await self._wake.wait()
            job = self._running[index] = self._inbox.popleft()
            try:
                # Converted only when the engine asks for the next item: a backlog costs no CPU.
                job.item = {**self._extra, **job.prepare()}
            except Exception as exc:  # one failed result per criterion, from the engine
                _log.warning(
                    "%s: run %s%s could not be evaluated: %s",
                    self._name,
                    job.run_id,
                    f" ({job.name})" if job.name else "",
                    exc,
                )
                yield Job(index, error=exc)
                continue
            job.summary = summarize(job.kind, job.item)
            yield Job(index, job.item)

    def _done(self, result: BatchResult) -> None:
        job = self._running[result.index]
        job.left -= 1
        if not job.left:
            del self._running[result.index]
        if result.error is not None and job.item is not None:  # a failed prepare was logged
            _log.warning(
                "evaluation of run %s against %r failed: %s",
                job.run_id,
                result.criterion,
                result.error,
            )
        self._record(job.outcome(result))
        if not self._running:
            self._wake.set()  # the batch may be idle now

    async def _stop(self) -> None:
        self._woken()
        pump = self._pump
        if pump is not None:
            await asyncio.shield(pump)
        if self._owns_client and isinstance(self._client, AsyncComposo):
            await self._client.aclose()

    def _record(self, record: EvaluationRecord, pending: bool = True) -> None:
        with self._cond:
            self._results.append(record)
            if record.error is None:
                self._completed += 1
            else:
                self._failed += 1
                self._errors.append(record)
        # The record is visible before on_result runs, and flush() returns only after it ran.
        if self._on_result is not None:
            try:
                self._on_result(record)
            except Exception:
                _log.exception("on_result raised for run %s; the record is kept", record.run_id)
        if pending:
            with self._cond:
                self._pending -= 1
                if self._pending == 0:
                    self._cond.notify_all()


def _check_limits(max_pending: Any, max_results: int | None, criteria: int) -> None:
    if not isinstance(max_pending, int) or max_pending < 1:
        raise ComposoValidationError(f"max_pending: must be at least 1, got {max_pending!r}")
    if max_pending < criteria:  # each run queues one evaluation per criterion
        raise ComposoValidationError(
            f"max_pending: {max_pending} is fewer than the {criteria} criteria "
            "evaluated for each run; nothing could ever be evaluated (raise max_pending)"
        )
    if max_results is not None and max_results < 0:
        raise ComposoValidationError(
            f"max_results: must be 0 or more (None keeps all), got {max_results!r}"
        )


_live: weakref.WeakSet[BackgroundEvaluator] = weakref.WeakSet()


@atexit.register
def _warn_unfinished() -> None:
    """Evaluations still queued at exit are lost; say so rather than losing them silently."""
    for evaluator in list(_live):
        if evaluator.pending and not evaluator.closed:
            _log.warning(
                "%s: %d evaluation(s) were still pending at exit and are lost; call flush() "
                "before the program ends",
                evaluator._name,
                evaluator.pending,
            )
