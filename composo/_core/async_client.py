"""The asynchronous client: the same methods as :class:`Composo`, as coroutines."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any

import httpx

from composo._core import batch, batch_async, build
from composo._core.base_client import TASK_PATH, BaseClient
from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse, TaskInfo
from composo._core.retry import async_retrying
from composo._core.transport import ShardedAsyncTransport
from composo._core.wire import RewardRequest, TraceRequest
from composo.errors import APITimeoutError

__all__ = ["AsyncComposo"]


class AsyncComposo(BaseClient):
    """Async client; at most ``max_concurrent_requests`` requests are in flight across all calls."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        num_retries: int = 1,
        model_core: str | None = None,
        timeout: float = 60.0,
        max_concurrent_requests: int = 5,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(
            api_key, base_url, num_retries, model_core, timeout, max_concurrent_requests
        )
        self._owns_http = http_client is None
        self._http = http_client
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _bind(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        """Connections and the request limit belong to one event loop: a client used again from
        a new loop (a second ``asyncio.run()``, another notebook cell) gets fresh ones."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._http is None or self._slots is None:
            self._loop = loop
            self._slots = asyncio.Semaphore(self.max_concurrent_requests)
            if self._owns_http:
                # Several small pools: httpcore's async pool costs CPU per request in its size.
                # The previous loop's connections cannot be used from this one; they are dropped.
                self._http = httpx.AsyncClient(
                    transport=ShardedAsyncTransport(max(self.max_concurrent_requests, 10))
                )
        assert self._http is not None
        return self._http, self._slots

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if self._owns_http and http is not None and self._loop is asyncio.get_running_loop():
            await http.aclose()
        # Connections opened under another (finished) loop cannot be closed from this one;
        # they are dropped with it.

    close = aclose

    async def __aenter__(self) -> AsyncComposo:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def evaluate(
        self,
        messages: Any = None,
        input: Any = None,
        criteria: str | Sequence[str] | None = None,
        system: str | None = None,
        tools: Any = None,
        result: Any = None,
        block: bool = True,
        tags: dict[str, Any] | None = None,
        evaluate_latest: bool | None = None,
        evaluator_name: str | Sequence[str] | None = None,
        explanation_cleaning: str | None = None,
        data_retention: str | None = None,
        model_core: str | None = None,
    ) -> Any:
        """See :meth:`Composo.evaluate`."""
        requests, single = build.reward_requests(
            messages=messages,
            input=input,
            criteria=criteria,
            system=system,
            tools=tools,
            result=result,
            tags=tags,
            evaluate_latest=evaluate_latest,
            evaluator_name=evaluator_name,
            explanation_cleaning=explanation_cleaning,
            data_retention=data_retention,
            model_core=model_core or self.model_core,
        )
        return await self._run_all(requests, single, block)

    async def evaluate_trace(
        self,
        trace: Any,
        criteria: str | Sequence[str] | None = None,
        model_core: str | None = None,
        block: bool = True,
        tags: dict[str, Any] | None = None,
        evaluator_name: str | Sequence[str] | None = None,
        explanation_cleaning: str | None = None,
        data_retention: str | None = None,
    ) -> Any:
        """See :meth:`Composo.evaluate_trace`."""
        requests, single = build.trace_requests(
            trace=trace,
            criteria=criteria,
            evaluator_name=evaluator_name,
            model_core=model_core or self.model_core,
            tags=tags,
            explanation_cleaning=explanation_cleaning,
            data_retention=data_retention,
        )
        return await self._run_all(requests, single, block)

    async def get_task(self, task_id: str) -> TaskInfo:
        """State of a background evaluation (served by the local Composo server)."""
        body = await self._call("GET", TASK_PATH.format(task_id=task_id), None)
        return TaskInfo.model_validate(body)

    async def wait(
        self, task_id: str, timeout: float | None = None, poll_interval: float = 0.25
    ) -> EvaluationResponse | MultiAgentTraceResponse:
        """Poll a background task until it finishes; raise its error, or time out clearly."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            outcome = self._task_outcome(await self.get_task(task_id))
            if outcome is not None:
                return outcome
            if deadline is not None and time.monotonic() + poll_interval > deadline:
                raise APITimeoutError(f"task {task_id} still not finished after {timeout}s")
            await asyncio.sleep(poll_interval)

    async def evaluate_many(
        self,
        items: Iterable[Any] | AsyncIterable[Any],
        criteria: str | Sequence[str] | None = None,
        *,
        evaluator_name: str | Sequence[str] | None = None,
        concurrency: int | None = None,
        progress: bool | Callable[[int, int | None], None] = False,
        model_core: str | None = None,
        tags: dict[str, Any] | None = None,
        evaluate_latest: bool | None = None,
        explanation_cleaning: str | None = None,
        data_retention: str | None = None,
    ) -> list[batch.BatchResult]:
        """See :meth:`Composo.evaluate_many`; ``items`` may also be an async iterable."""
        plan, results = self._batch(
            items,
            criteria,
            evaluator_name,
            concurrency,
            progress,
            model_core=model_core,
            tags=tags,
            evaluate_latest=evaluate_latest,
            explanation_cleaning=explanation_cleaning,
            data_retention=data_retention,
        )
        return batch.ordered([r async for r in results], plan)

    def evaluate_many_iter(
        self,
        items: Iterable[Any] | AsyncIterable[Any],
        criteria: str | Sequence[str] | None = None,
        *,
        evaluator_name: str | Sequence[str] | None = None,
        concurrency: int | None = None,
        progress: bool | Callable[[int, int | None], None] = False,
        model_core: str | None = None,
        tags: dict[str, Any] | None = None,
        evaluate_latest: bool | None = None,
        explanation_cleaning: str | None = None,
        data_retention: str | None = None,
    ) -> AsyncIterator[batch.BatchResult]:
        """See :meth:`Composo.evaluate_many_iter`: ``async for`` over results as they finish."""
        _, results = self._batch(
            items,
            criteria,
            evaluator_name,
            concurrency,
            progress,
            model_core=model_core,
            tags=tags,
            evaluate_latest=evaluate_latest,
            explanation_cleaning=explanation_cleaning,
            data_retention=data_retention,
        )
        return results

    def _batch(
        self,
        items: Iterable[Any] | AsyncIterable[Any],
        criteria: Any,
        evaluator_name: Any,
        concurrency: int | None,
        progress: bool | Callable[[int, int | None], None],
        model_core: str | None,
        **options: Any,
    ) -> tuple[batch.Plan, AsyncIterator[batch.BatchResult]]:
        """Check everything up front, then the results as they finish (shared by both forms)."""
        plan, window, bar = batch.setup(
            items,
            criteria,
            evaluator_name,
            concurrency,
            progress,
            self.max_concurrent_requests,
            model_core=model_core or self.model_core,
            **options,
        )
        return plan, batch_async.astream(self, batch_async.ajobs_from(items), plan, window, bar)

    async def _run_all(
        self, requests: Sequence[RewardRequest | TraceRequest], single: bool, block: bool
    ) -> Any:
        if len(requests) == 1:
            out = await self._run_one(requests[0], block)
            return out if single else [out]
        return list(await asyncio.gather(*(self._run_one(r, block) for r in requests)))

    async def _run_one(self, request: RewardRequest | TraceRequest, block: bool) -> Any:
        body = await self._call("POST", self._path(request, block), request.wire())
        return self._parse(request, body, block)

    async def _call(self, method: str, path: str, json: Any) -> Any:
        url = self.base_url + path
        deadline = time.monotonic() + self.timeout
        async for attempt in async_retrying(self.num_retries, self.timeout):
            with attempt:
                http, slots = self._bind()
                async with slots:
                    try:
                        response = await http.request(
                            method,
                            url,
                            json=json,
                            headers=self._headers(),
                            timeout=self._attempt_timeout(deadline),
                        )
                    except httpx.HTTPError as exc:
                        raise self._transport_error(exc, url) from None
                return self._decode(response)
        raise AssertionError("unreachable")  # pragma: no cover
