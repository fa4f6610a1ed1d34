"""The asynchronous client: the same methods as :class:`Composo`, as coroutines."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from composo._core import forks
from composo._core.base_client import BaseClient, Call, RequestHeaders, Settings, awaited
from composo._core.retry import is_retryable
from composo.errors import ComposoError, RateLimitError

if TYPE_CHECKING:  # the model modules and the batch engine load on first use
    from typing_extensions import Self, Unpack

    from composo._core.options import EvaluateOptions
    from composo._core.plan import BatchResult, BatchResults, Plan
    from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse, TaskInfo
    from composo._core.wire import RewardRequest, TraceRequest

    Request = RewardRequest | TraceRequest


class AsyncClient(BaseClient):
    """The async client (``composo.AsyncComposo`` is this plus the features above the core): at
    most ``max_concurrent_requests`` requests in flight across all calls; the arguments are
    :class:`~composo._core.client.SyncClient`'s, with an ``httpx.AsyncClient`` as
    ``http_client`` and an async transport made by ``transport`` (once per event loop)."""

    def __init__(
        self,
        api_key: str | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        transport: Callable[[], httpx.AsyncBaseTransport] | None = None,
        **settings: Unpack[Settings],
    ) -> None:
        super().__init__(api_key, settings, http_client, transport)
        self._http = http_client  # a supplied client (None: the own ones, per loop)
        # Connections and the request limit belong to one event loop: each loop that uses the
        # client gets its own (loops in sequence, or at once in different threads).
        self._loops: dict[asyncio.AbstractEventLoop, tuple[httpx.AsyncClient, asyncio.Semaphore]]
        self._loops = {}
        self._loops_lock = threading.Lock()
        forks.register(self)

    def _after_fork(self) -> None:
        """In a forked child the parent's connections and pace stay the parent's, unclosed."""
        forks.leave_behind(self._loops)
        self._loops = {}
        self._loops_lock = threading.Lock()
        self._throttle.reset()

    def _bind(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        """The running loop's connections and request slots, made on its first use."""
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            with self._loops_lock:
                state = self._loops.get(loop)
                if state is None:
                    state = self._loops[loop] = self._new_loop(loop)
        return state

    def _new_loop(
        self, loop: asyncio.AbstractEventLoop
    ) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        for old in [o for o in self._loops if o.is_closed()]:
            del self._loops[old]  # a finished loop's connections go with it
        if self._http is not None:
            if any(other is not loop and other.is_running() for other in self._loops):
                raise ComposoError(
                    "http_client: this AsyncComposo's httpx.AsyncClient is in use on another "
                    "event loop (another thread's); an httpx client cannot be shared between "
                    "event loops. Give each loop its own AsyncComposo (or its own http_client), "
                    "or leave http_client out: the client's own connections are kept per loop"
                )
            http = self._http
        else:
            http = httpx.AsyncClient(
                transport=self._transport(), headers=self._base_headers, timeout=self.timeout
            )
        return http, asyncio.Semaphore(self.max_concurrent_requests)

    def _connections(self) -> httpx.AsyncBaseTransport:
        from composo._core.connections import AsyncShards

        return AsyncShards(max(self.max_concurrent_requests, 10))

    async def aclose(self) -> None:
        """Close this client's connections on the running loop (a supplied ``http_client``
        stays open)."""
        loop = asyncio.get_running_loop()
        with self._loops_lock:
            state = self._loops.pop(loop, None)
        if self._owns_http and state is not None:
            await state[0].aclose()

    close = aclose

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    evaluate = awaited(BaseClient.evaluate)
    """As :meth:`Composo.evaluate`, awaited: one response for one criterion (a string or a list
    of one), a list in the order given for several."""
    evaluate_trace = awaited(BaseClient.evaluate_trace)
    """As :meth:`Composo.evaluate_trace`, awaited."""

    async def get_task(self, task_id: str) -> TaskInfo:
        """As :meth:`Composo.get_task`, awaited."""
        return self._task_info(await self._call("GET", self._task_path(task_id), None))

    async def wait(
        self, task_id: str, timeout: float | None = None, poll_interval: float = 0.25
    ) -> EvaluationResponse | MultiAgentTraceResponse:
        """As :meth:`Composo.wait`, polling without blocking the loop."""
        polls = self._polls(task_id, timeout, poll_interval)
        while (outcome := self._task_outcome(await self.get_task(task_id))) is None:
            await asyncio.sleep(next(polls))
        return outcome

    async def evaluate_many(
        self,
        items: Iterable[Any] | AsyncIterable[Any],
        criteria: str | Sequence[str] | None = None,
        *,
        evaluator_name: str | Sequence[str] | None = None,
        concurrency: int | None = None,
        progress: bool | Callable[[int, int | None], None] = False,
        **options: Unpack[EvaluateOptions],
    ) -> BatchResults:
        """As :meth:`Composo.evaluate_many`, awaited; ``items`` may be an async iterable."""
        plan, results = self._many(items, criteria, evaluator_name, concurrency, progress, options)
        return plan.ordered([r async for r in results])

    def evaluate_many_iter(
        self,
        items: Iterable[Any] | AsyncIterable[Any],
        criteria: str | Sequence[str] | None = None,
        *,
        evaluator_name: str | Sequence[str] | None = None,
        concurrency: int | None = None,
        progress: bool | Callable[[int, int | None], None] = False,
        **options: Unpack[EvaluateOptions],
    ) -> AsyncIterator[BatchResult]:
        """As :meth:`Composo.evaluate_many_iter`, for ``async for``; ``items`` may be
        an async iterable."""
        return self._many(items, criteria, evaluator_name, concurrency, progress, options)[1]

    def _many(self, items: Any, *args: Any) -> tuple[Plan, AsyncIterator[BatchResult]]:
        """Check everything now, then stream the results through tasks."""
        from composo._core import batch_async

        plan, window, bar = self._plan(items, *args)
        return plan, batch_async.astream(
            self.send, batch_async.ajobs_from(items), plan, window, bar
        )

    async def _run_all(self, requests: Sequence[Request], block: bool) -> Any:
        """One request's answer, or several answers as a list in request order."""
        if len(requests) == 1:
            return await self._request(requests[0], block)
        return list(await asyncio.gather(*(self._request(r, block) for r in requests)))

    async def _request(self, request: Request, block: bool = True, patient: bool = False) -> Any:
        """One request; an impatient one (not a batch's) counts a 429 among its retries."""
        path = self._path(request, block)
        body = await self._call("POST", path, request.wire(), block=block, patient=patient)
        return self._parse(request, body, block)

    async def send(self, request: Request, block: bool = True) -> Any:
        """As :meth:`Composo.send`, awaited: one built request, throttling waited out within
        the call's ``timeout``."""
        return await self._request(request, block, patient=True)

    async def _call(
        self, method: str, path: str, json: Any, *, block: bool = True, patient: bool = False
    ) -> Any:
        deadline = time.monotonic() + self.timeout
        call = (method, self.base_url + path, json, self._headers(block), deadline)
        try:  # the first attempt, without the retry machinery
            return await self._attempt(call, patient)
        except ComposoError as exc:
            if not is_retryable(exc):
                raise
            failed = exc
        try:
            return await self._policy.asynchronous(deadline, failed, self._attempt, call, patient)
        except RateLimitError as exc:
            raise self._refusal(exc, deadline) from None

    async def _attempt(self, call: Call, patient: bool) -> Any:
        """One attempt; a patient one waits out 429s."""
        waits = 0
        while True:
            try:
                return await self._once(*call)
            except RateLimitError as exc:
                wait = self._throttled(exc, call[-1], patient, waits)
                waits += 1
            if wait:
                await asyncio.sleep(wait)

    async def _once(
        self, method: str, url: str, json: Any, headers: RequestHeaders, deadline: float
    ) -> Any:
        """One exchange, cancelled at ``deadline`` whatever the transport does (waiting for a
        request slot and the client's pace included)."""
        left = deadline - time.monotonic()
        try:
            if sys.version_info >= (3, 11):
                async with asyncio.timeout(left):
                    response, seen, raw = await self._exchange(method, url, json, headers, deadline)
            else:  # pragma: no cover (3.10)
                exchange = self._exchange(method, url, json, headers, deadline)
                response, seen, raw = await asyncio.wait_for(exchange, left)
        except (TimeoutError, asyncio.TimeoutError):
            raise self._timed_out() from None
        except (httpx.HTTPError, OSError) as exc:  # httpcore 1.0.0 lets TLS errors out raw
            raise self._transport_error(exc, url) from None
        return self._decode(response, seen, raw)

    async def _exchange(
        self, method: str, url: str, json: Any, headers: RequestHeaders, deadline: float
    ) -> tuple[httpx.Response, dict[str, str], bytes]:
        """Wait for a request slot and the client's pace, send, read the answer (bounded)."""
        http, slots = self._bind()
        if deadline <= time.monotonic():
            raise self._timed_out()
        async with slots:
            while wait := self._admit(deadline):  # a hold begun meanwhile is waited out too
                await asyncio.sleep(wait)
            left = deadline - time.monotonic()
            request = self._build(http, method, url, json, headers, left)
            response = await http.send(request, stream=True)
            try:
                inflater, seen = self._inflater(response)
                async for chunk in _raw(response):
                    inflater.feed(chunk)
                return response, seen, inflater.result()
            finally:
                await response.aclose()


async def _raw(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's raw chunks, none if a transport already read it."""
    if not response.is_stream_consumed:
        async for chunk in response.aiter_raw():
            yield chunk
