"""Evaluate a Ray Dataset on a cluster, within one request budget for all workers.

``ds.map_batches(ComposoBatch, fn_constructor_kwargs={...}, batch_format="pandas")`` scores each
batch on the workers; :class:`RequestBudget` is one Ray actor that hands out permits, so however
many workers run, together they keep at most ``max_concurrent_requests`` requests in flight and
start at most ``requests_per_minute`` requests a minute. The results are the rows
``Composo.evaluate_dataframe`` gives for the same table.

Needs the ``ray`` extra (``pip install 'composo[ray]'``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from composo.dataframes import BatchEvaluator
from composo.errors import ComposoValidationError

try:
    import ray
except ImportError:  # pragma: no cover - depends on the environment
    raise ImportError("composo.ray needs Ray: pip install 'composo[ray]'") from None

__all__ = ["BudgetTransport", "ComposoBatch", "RequestBudget"]


class _Permits:
    """The actor's state: a semaphore for requests in flight and a clock for the rate."""

    def __init__(self, limit: int, requests_per_minute: float | None) -> None:
        self.limit = limit
        self.interval = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self.in_flight = 0
        self.peak = 0
        self.granted = 0
        self.first = 0.0
        self.last = 0.0
        self._next = 0.0
        self._free: asyncio.Semaphore | None = None
        self._clock: asyncio.Lock | None = None

    async def acquire(self) -> None:
        if self._free is None or self._clock is None:
            self._free, self._clock = asyncio.Semaphore(self.limit), asyncio.Lock()
        await self._free.acquire()
        if self.interval:
            async with self._clock:
                now = time.monotonic()
                start = max(now, self._next)
                self._next = start + self.interval
            if start > now:
                await asyncio.sleep(start - now)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.granted += 1
        if self.granted == 1:
            self.first = time.monotonic()

    async def release(self) -> None:
        assert self._free is not None
        self.in_flight -= 1
        self.last = time.monotonic()
        self._free.release()

    async def stats(self) -> dict[str, float]:
        return {
            "in_flight": self.in_flight,
            "peak": self.peak,
            "granted": self.granted,
            "seconds": max(0.0, self.last - self.first),
        }


class RequestBudget:
    """The cluster-wide limits, held by one Ray actor; pass it to :class:`ComposoBatch`.

    Args:
        max_concurrent_requests: Requests in flight across all workers together.
        requests_per_minute: Requests all workers together may start per minute (``None``: no
            limit besides the concurrency).
        name: Give the actor a name to share one budget between drivers of a cluster.

    Raises:
        ComposoValidationError: A limit is not a positive number.
    """

    def __init__(
        self,
        max_concurrent_requests: int,
        requests_per_minute: float | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(max_concurrent_requests, int) or max_concurrent_requests < 1:
            raise ComposoValidationError(
                "max_concurrent_requests: must be an integer of at least 1, "
                f"got {max_concurrent_requests!r}"
            )
        if requests_per_minute is not None and requests_per_minute <= 0:
            raise ComposoValidationError(
                f"requests_per_minute: must be positive, got {requests_per_minute!r}"
            )
        self.max_concurrent_requests = max_concurrent_requests
        self.requests_per_minute = requests_per_minute
        remote: Any = ray.remote  # its typed overloads do not cover actor options
        actor = remote(num_cpus=0, max_concurrency=10_000)(_Permits)
        if name is not None:
            actor = actor.options(name=name, get_if_exists=True)
        self.actor = actor.remote(max_concurrent_requests, requests_per_minute)

    def acquire(self) -> None:
        """Wait for a permit (a request may start)."""
        ray.get(self.actor.acquire.remote())

    def release(self) -> None:
        """Give a permit back (the request finished)."""
        self.actor.release.remote()

    def stats(self) -> dict[str, float]:
        """``in_flight`` now, the ``peak`` reached, the permits ``granted`` so far and the
        ``seconds`` from the first permit to the last one given back."""
        out: dict[str, float] = ray.get(self.actor.stats.remote())
        return out


class BudgetTransport(httpx.BaseTransport):
    """Each request (each attempt of it) holds one permit of the budget until its answer is read."""

    def __init__(self, inner: httpx.BaseTransport, budget: RequestBudget) -> None:
        self.inner = inner
        self.budget = budget

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.budget.acquire()
        try:
            response = self.inner.handle_request(request)
            response.read()
        finally:
            self.budget.release()
        return response

    def close(self) -> None:
        self.inner.close()


class ComposoBatch(BatchEvaluator):
    """What ``Dataset.map_batches`` calls: a batch in, the batch with its result columns out.

    Use it as the class (``ds.map_batches(ComposoBatch, fn_constructor_kwargs={...},
    concurrency=N, batch_format="pandas")``: one client per worker, kept across batches) or as
    an instance (a task per batch). Every argument of
    :class:`~composo.dataframes.BatchEvaluator` is accepted, plus ``budget``.

    Args:
        criteria: A criterion, a list, or ``{name: criterion}``.
        budget: The cluster-wide :class:`RequestBudget` (``None``: only this worker's
            ``max_concurrent_requests`` and ``requests_per_minute`` apply).
        **settings: ``columns``, ``api_key``, ``base_url``, ``max_concurrent_requests`` (default:
            the budget's), ``requests_per_minute``, ``cache``, evaluate options...
    """

    def __init__(
        self,
        criteria: str | Sequence[str] | Mapping[str, str] | None = None,
        *,
        budget: RequestBudget | None = None,
        **settings: Any,
    ) -> None:
        if budget is not None:
            settings.setdefault("max_concurrent_requests", budget.max_concurrent_requests)
        super().__init__(criteria, **settings)
        self.budget = budget

    def _gate(self, transport: httpx.BaseTransport) -> httpx.BaseTransport:
        return transport if self.budget is None else BudgetTransport(transport, self.budget)
