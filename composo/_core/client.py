"""The synchronous client: several criteria run at once on a small thread pool, no event loop."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING, Any

import httpx

from composo._core import cancel, forks
from composo._core.base_client import BaseClient, Call, RequestHeaders, Settings
from composo._core.connections import Connections
from composo._core.connections import deadline as socket_deadline
from composo._core.retry import is_retryable
from composo.errors import ComposoError, RateLimitError

if TYPE_CHECKING:  # the model modules and the thread pool load on first use
    from concurrent.futures import ThreadPoolExecutor

    from typing_extensions import Self, Unpack

    from composo._core.options import EvaluateOptions
    from composo._core.plan import BatchResult, BatchResults, Plan
    from composo._core.ratelimit import Permits
    from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse, TaskInfo
    from composo._core.wire import RewardRequest, TraceRequest

    Request = RewardRequest | TraceRequest


def _slots(count: int) -> SimpleQueue[None]:
    """``count`` request slots (a C queue: a Python semaphore costs microseconds a request)."""
    slots: SimpleQueue[None] = SimpleQueue()
    for _ in range(count):
        slots.put(None)
    return slots


class SyncClient(BaseClient):
    """The blocking client (``composo.Composo`` is this plus the features above the core).
    ``transport`` makes the own ``httpx.Client``'s transport on the first request (default:
    :class:`~composo._core.connections.Connections`); ``permits`` is a budget beyond this
    process, each attempt holding one until its answer is read."""

    def __init__(
        self,
        api_key: str | None = None,
        *,
        http_client: httpx.Client | None = None,
        transport: Callable[[], httpx.BaseTransport] | None = None,
        permits: Permits | None = None,
        **settings: Unpack[Settings],
    ) -> None:
        super().__init__(api_key, settings, http_client, transport)
        # An owned httpx.Client is built on the first request: it loads the CA bundle (tens of ms).
        self._http_client = http_client
        self._http_lock = threading.Lock()
        self._closed = False
        self._throttle.permits = permits
        self._slots = _slots(self.max_concurrent_requests)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        forks.register(self)

    def _after_fork(self) -> None:
        """In a forked child, the parent's connections, threads, locks and pace stay its own."""
        if self._owns_http:
            forks.leave_behind(self._http_client)
            self._http_client = None
        forks.leave_behind(self._pool)
        self._pool = None
        self._http_lock = threading.Lock()
        self._pool_lock = threading.Lock()
        self._slots = _slots(self.max_concurrent_requests)
        self._throttle.reset()

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """Release the connections and threads (a supplied ``http_client`` stays open)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
        self._closed = True
        if self._owns_http and self._http_client is not None:
            self._http_client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- public API ---------------------------------------------------------------------------

    def get_task(self, task_id: str) -> TaskInfo:
        """Read the state of a background evaluation.

        Args:
            task_id: The ``task_id`` an ``evaluate(..., block=False)`` call returned.

        Returns:
            The task's status and, once it finished, its result or error.

        Raises:
            ComposoValidationError: ``task_id`` cannot be a task's id (empty, a path...).
            NotFoundError: No such task.
        """
        return self._task_info(self._call("GET", self._task_path(task_id), None))

    def wait(
        self, task_id: str, timeout: float | None = None, poll_interval: float = 0.25
    ) -> EvaluationResponse | MultiAgentTraceResponse:
        """Poll a background evaluation until it finishes.

        Args:
            task_id: The ``task_id`` to wait for.
            timeout: Seconds to wait at most (``None``: as long as it takes).
            poll_interval: Seconds between polls.

        Returns:
            The evaluation's response.

        Raises:
            TaskFailedError: The evaluation failed on the server.
            APITimeoutError: ``timeout`` passed first.
        """
        polls = self._polls(task_id, timeout, poll_interval)
        while (outcome := self._task_outcome(self.get_task(task_id))) is None:
            time.sleep(next(polls))
        return outcome

    def evaluate_many(
        self,
        items: Iterable[Any],
        criteria: str | Sequence[str] | None = None,
        *,
        evaluator_name: str | Sequence[str] | None = None,
        concurrency: int | None = None,
        progress: bool | Callable[[int, int | None], None] = False,
        **options: Unpack[EvaluateOptions],
    ) -> BatchResults:
        """Score every item against every criterion; a failed pair does not stop the others.

        Args:
            items: ``evaluate()`` argument dicts (``messages`` or ``input``, ``result``,
                ``system``, ``tools``, optional ``id`` and ``metadata``, a ``trace`` instead of
                a conversation, any option for that item alone, and ``criteria``: the subset
                of the run's criteria this item still needs), or objects a plugin converts.
            criteria: One criterion or a list, applied to every item (or ``evaluator_name``).
            evaluator_name: Saved evaluator name(s), instead of ``criteria``.
            concurrency: Requests in flight (default and ceiling: ``max_concurrent_requests``).
            progress: ``True`` shows a progress bar (the ``cli`` extra); a callable is called
                with ``(done, total)`` after each pair (``total`` is ``None`` if unknown).
            **options: :class:`~composo.types.EvaluateOptions` for every item.

        Returns:
            One :class:`~composo.BatchResult` per pair, in item order then criteria order; a
            failed pair carries its ``error``.

        Raises:
            ComposoValidationError: The criteria, options or ``items`` are unusable (before any
                request; a bad item only fails its own results).
        """
        plan, results = self._many(items, criteria, evaluator_name, concurrency, progress, options)
        try:
            return plan.ordered(results)
        finally:
            results.close()  # interrupted (Ctrl-C): the requests in flight end now

    def evaluate_many_iter(
        self,
        items: Iterable[Any],
        criteria: str | Sequence[str] | None = None,
        *,
        evaluator_name: str | Sequence[str] | None = None,
        concurrency: int | None = None,
        progress: bool | Callable[[int, int | None], None] = False,
        **options: Unpack[EvaluateOptions],
    ) -> Generator[BatchResult, None, None]:
        """Like :meth:`evaluate_many`, but yield each result as it finishes, holding nothing.

        Items are read only as request slots free up, so a dataset of any size streams in flat
        memory; results come in no set order (``result.index`` is the item's position).
        Closing the generator, or leaving a ``for`` loop over it early (``break``, an
        exception, Ctrl-C), stops the requests in flight at once.

        The arguments and the errors raised when it is called are :meth:`evaluate_many`'s;
        it returns an iterator of :class:`~composo.BatchResult`.
        """
        return self._many(items, criteria, evaluator_name, concurrency, progress, options)[1]

    # -- machinery ----------------------------------------------------------------------------

    def _many(self, items: Any, *args: Any) -> tuple[Plan, Generator[BatchResult, None, None]]:
        """Check everything now, then stream the results through threads."""
        from composo._core.batch import stream
        from composo._core.plan import jobs_from

        plan, window, bar = self._plan(items, *args)
        return plan, stream(self.send, jobs_from(items), plan, window, bar)

    @property
    def _http(self) -> httpx.Client:
        http = self._http_client
        if http is None:
            with self._http_lock:
                http = self._http_client
                if http is None:
                    http = httpx.Client(
                        transport=self._transport(),
                        headers=self._base_headers,
                        timeout=self.timeout,
                    )
                    self._http_client = http
                    if self._closed:  # closed before its first request: refused as before
                        http.close()
        return http

    def _connections(self) -> httpx.BaseTransport:
        return Connections(max(self.max_concurrent_requests, 10))

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(
                    max_workers=self.max_concurrent_requests, thread_name_prefix="composo"
                )
            return self._pool

    def _run_all(self, requests: Sequence[Request], block: bool) -> Any:
        """One request's answer, or several answers as a list in request order."""
        if len(requests) == 1:
            return self._request(requests[0], block)
        results: list[Any] = [None] * len(requests)
        from composo._core.runner import bounded

        send = self._request if block else functools.partial(self._request, block=False)
        window = self.max_concurrent_requests
        for outcome in bounded(send, requests, window, pool=self._executor()):
            if outcome.error is not None:
                raise outcome.error
            results[outcome.position] = outcome.value
        return results

    def _request(self, request: Request, block: bool = True, patient: bool = False) -> Any:
        """One request; an impatient one (not a batch's) counts a 429 among its retries."""
        path = self._path(request, block)
        body = self._call("POST", path, request.wire(), block=block, patient=patient)
        return self._parse(request, body, block)

    def send(self, request: Request, block: bool = True) -> Any:
        """Send one built request as a batch does: throttling (429) is waited out on a budget
        of its own, within the call's ``timeout``, so a throttled run slows down instead of
        failing; ``num_retries`` stays for failures. What ``evaluate_many`` and background
        evaluation send each request with.

        Args:
            request: A :class:`~composo.types.RewardRequest` or
                :class:`~composo.types.TraceRequest`, sent as built (the client's
                ``model_core`` is not added to it).
            block: ``False`` submits it as a background task (``{"task_id": ...}``).

        Returns:
            Its :class:`EvaluationResponse` or :class:`MultiAgentTraceResponse`.

        Raises:
            APIStatusError: The server refused it, or still throttled it at the timeout.
            APIConnectionError: The server could not be reached.
        """
        return self._request(request, block, patient=True)

    def _call(
        self, method: str, path: str, json: Any, *, block: bool = True, patient: bool = False
    ) -> Any:
        deadline = time.monotonic() + self.timeout
        call = (method, self.base_url + path, json, self._headers(block), deadline)
        try:  # the first attempt, without the retry machinery
            return self._attempt(call, patient)
        except ComposoError as exc:
            if not is_retryable(exc):
                raise
            failed = exc
        try:
            return self._policy.sync(deadline, failed, self._attempt, call, patient)
        except RateLimitError as exc:
            raise self._refusal(exc, deadline) from None

    def _attempt(self, call: Call, patient: bool) -> Any:
        """One attempt; a patient one waits out 429s."""
        waits = 0
        while True:
            try:
                return self._once(*call)
            except RateLimitError as exc:
                wait = self._throttled(exc, call[-1], patient, waits)
                waits += 1
            if wait:
                cancel.sleep(wait)

    def _once(
        self, method: str, url: str, json: Any, headers: RequestHeaders, deadline: float
    ) -> Any:
        """Take a request slot, wait for the pace, send, read the answer, all by ``deadline``
        (our connections end every socket wait by it; any transport: checked per chunk)."""
        http = self._http
        try:
            self._slots.get(timeout=max(0.0, deadline - time.monotonic()))
        except Empty:
            raise self._timed_out() from None
        try:
            permits = self._turn(deadline)
            try:  # from here the permit is given back whatever happens
                timeout = self._attempt_timeout(deadline)
                request = self._build(http, method, url, json, headers, timeout)
                with socket_deadline(deadline):
                    response = http.send(request, stream=True)
                    try:
                        inflater, seen = self._inflater(response)
                        for chunk in () if response.is_stream_consumed else response.iter_raw():
                            if time.monotonic() > deadline:
                                raise self._timed_out()
                            inflater.feed(chunk)
                        raw = inflater.result()
                    finally:
                        response.close()
            except httpx.HTTPError as exc:
                cancel.check()  # the caller left: the error is the cancellation's
                raise self._transport_error(exc, url) from None
            finally:
                if permits is not None:
                    permits.release()
        finally:
            self._slots.put(None)
        return self._decode(response, seen, raw)

    def _turn(self, deadline: float) -> Any:
        """Wait (holding a slot) for the client's pace; returns the cluster permit taken, if any."""
        permits = self._throttle.permits
        while True:
            cancel.check()
            while wait := self._admit(deadline):
                cancel.sleep(wait)
            if permits is None:
                return None
            permits.acquire()  # a cluster's budget: held until the answer is read
            if not self._throttle.held():
                return permits
            permits.release()  # a hold began while waiting for the permit
