"""The synchronous client. Several criteria run at once on a small thread pool, so it needs no event
loop and works the same in scripts, threads, Jupyter and async frameworks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, Any

import httpx

from composo._core import build
from composo._core.base_client import TASK_PATH, BaseClient
from composo._core.responses import EvaluationResponse, MultiAgentTraceResponse, TaskInfo
from composo._core.retry import retrying
from composo._core.wire import RewardRequest, TraceRequest
from composo.errors import APITimeoutError

if TYPE_CHECKING:  # loaded by the batch methods, on first use
    from composo._core import batch

__all__ = ["Composo"]


class Composo(BaseClient):
    """Evaluate conversations and traces against plain-English criteria.

    ``http_client`` lets tests and proxies supply their own ``httpx.Client`` (it is not closed
    by :meth:`close`).
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        num_retries: int = 1,
        model_core: str | None = None,
        timeout: float = 60.0,
        http_client: httpx.Client | None = None,
        max_concurrent_requests: int = 5,
    ) -> None:
        super().__init__(
            api_key, base_url, num_retries, model_core, timeout, max_concurrent_requests
        )
        self._owns_http = http_client is None
        connections = max(max_concurrent_requests, 10)
        self._http = http_client or httpx.Client(
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        )
        self._slots = threading.BoundedSemaphore(max_concurrent_requests)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Composo:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- public API ---------------------------------------------------------------------------

    def evaluate(
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
        """Score a conversation against one or more criteria.

        Returns an :class:`EvaluationResponse` for one criterion, a list in the given order for
        several, or ``{"task_id": ...}`` (a list of them) with ``block=False``.
        """
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
        return self._run_all(requests, single, block)

    def evaluate_trace(
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
        """Score a multi-agent trace; returns :class:`MultiAgentTraceResponse` (or a list)."""
        requests, single = build.trace_requests(
            trace=trace,
            criteria=criteria,
            evaluator_name=evaluator_name,
            model_core=model_core or self.model_core,
            tags=tags,
            explanation_cleaning=explanation_cleaning,
            data_retention=data_retention,
        )
        return self._run_all(requests, single, block)

    def get_task(self, task_id: str) -> TaskInfo:
        """State of a background evaluation (served by the local Composo server)."""
        body = self._call("GET", TASK_PATH.format(task_id=task_id), None)
        return TaskInfo.model_validate(body)

    def wait(
        self, task_id: str, timeout: float | None = None, poll_interval: float = 0.25
    ) -> EvaluationResponse | MultiAgentTraceResponse:
        """Poll a background task until it finishes; raise its error, or time out clearly."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            outcome = self._task_outcome(self.get_task(task_id))
            if outcome is not None:
                return outcome
            if deadline is not None and time.monotonic() + poll_interval > deadline:
                raise APITimeoutError(f"task {task_id} still not finished after {timeout}s")
            time.sleep(poll_interval)

    def evaluate_many(
        self,
        items: Iterable[Any],
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
        """Score every item against every criterion; one :class:`~composo.BatchResult` per
        pair, in item order then criteria order. A failed pair carries its ``error`` and the
        others go on. Items are ``evaluate()`` argument dicts (``messages`` or ``input``,
        ``result``, ``system``, ``tools``, ``tags``, optional ``id``) or objects a plugin converts.
        ``concurrency`` defaults to (and is capped by) ``max_concurrent_requests``."""
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
        from composo._core import batch

        return batch.ordered(results, plan)

    def evaluate_many_iter(
        self,
        items: Iterable[Any],
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
    ) -> Iterator[batch.BatchResult]:
        """Like :meth:`evaluate_many`, but yields each result as it finishes (in no set order)
        and holds nothing: items are read only as request slots free up."""
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

    # -- machinery ----------------------------------------------------------------------------

    def _batch(
        self,
        items: Iterable[Any],
        criteria: Any,
        evaluator_name: Any,
        concurrency: int | None,
        progress: bool | Callable[[int, int | None], None],
        model_core: str | None,
        **options: Any,
    ) -> tuple[batch.Plan, Iterator[batch.BatchResult]]:
        """Check everything up front, then the results as they finish (shared by both forms)."""
        from composo._core import batch

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
        return plan, batch.stream(self, batch.jobs_from(items), plan, window, bar)

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.max_concurrent_requests, thread_name_prefix="composo"
                )
            return self._pool

    def _run_all(
        self, requests: Sequence[RewardRequest | TraceRequest], single: bool, block: bool
    ) -> Any:
        if len(requests) == 1:
            out = self._run_one(requests[0], block)
            return out if single else [out]
        futures = [self._executor().submit(self._run_one, r, block) for r in requests]
        return [f.result() for f in futures]

    def _run_one(self, request: RewardRequest | TraceRequest, block: bool) -> Any:
        body = self._call("POST", self._path(request, block), request.wire())
        return self._parse(request, body, block)

    def _call(self, method: str, path: str, json: Any) -> Any:
        url = self.base_url + path
        deadline = time.monotonic() + self.timeout
        for attempt in retrying(self.num_retries, self.timeout):
            with attempt, self._slots:
                try:
                    response = self._http.request(
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
