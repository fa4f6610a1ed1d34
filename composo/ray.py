"""Evaluate a Ray Dataset on a cluster, within one request budget for all workers.

``ds.map_batches(ComposoBatch, ...)`` scores each batch as ``evaluate_dataframe`` would;
:class:`RequestBudget` is one Ray actor handing out permits, so all workers together keep to
``max_concurrent_requests`` and ``requests_per_minute``. Needs ``pip install 'composo[ray]'``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from composo._core.ratelimit import check_requests_per_minute
from composo.dataframes import BatchEvaluator
from composo.errors import ComposoValidationError

try:
    import ray
except ImportError:  # pragma: no cover - depends on the environment
    raise ImportError("composo.ray needs Ray: pip install 'composo[ray]'") from None

__all__ = ["ComposoBatch", "RequestBudget"]


class _Permits:
    """The actor's state: a semaphore for requests in flight and a clock for the rate."""

    def __init__(self, limit: int, requests_per_minute: float | None) -> None:
        self.interval = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self.in_flight = 0  # permits out with the workers
        self.peak = 0
        self.granted = 0  # requests started with them, as the workers report
        self.first = 0.0
        self.last = 0.0
        self.calls = 0  # acquire and release calls taken
        self._next = 0.0
        # bound to the actor's event loop on first use
        self._free = asyncio.Semaphore(limit)
        self._clock = asyncio.Lock()

    async def acquire(self, want: int = 1) -> int:
        """Wait for one permit, then take up to ``want`` in all of those free now (one only
        when paced: each request start needs its own place on the clock)."""
        self.calls += 1
        await self._free.acquire()
        got = 1
        if self.interval:
            async with self._clock:
                now = time.monotonic()
                start = max(now, self._next)
                self._next = start + self.interval
            if start > now:
                await asyncio.sleep(start - now)
        else:
            while got < want and not self._free.locked():
                await self._free.acquire()  # free: returns without waiting
                got += 1
        self.in_flight += got
        self.peak = max(self.peak, self.in_flight)
        if not self.first:
            self.first = time.monotonic()
        return got

    async def release(self, count: int = 1, used: int = 0) -> None:
        """``count`` permits back, and ``used`` more requests started since the last report."""
        self.calls += 1
        self.in_flight -= count
        self.granted += used
        self.last = time.monotonic()
        for _ in range(count):
            self._free.release()

    async def stats(self) -> dict[str, float]:
        return {
            "in_flight": self.in_flight,
            "peak": self.peak,
            "granted": self.granted,
            "seconds": max(0.0, self.last - self.first),
            "calls": self.calls,
        }


_SHARING = threading.Lock()


class _Share:
    """This process's permits: a freed one goes straight to a waiting thread; with nobody
    waiting it is held ``HOLD`` seconds, then returned with any others freed meanwhile (one
    actor call, not one each). One thread at a time asks the actor, for every waiting thread."""

    HOLD = 0.003

    def __init__(self, actor: Any, paced: bool) -> None:
        self.actor = actor
        self.paced = paced  # every start goes through the actor's clock
        lock = threading.Lock()
        self.cond = threading.Condition(lock)  # threads waiting for a permit
        self.due = threading.Condition(lock)  # the returner, waiting for permits to return
        self.free = 0
        self.waiting = 0
        self.asking = False
        self.used = 0
        self.holding = False  # free permits nobody waits for: the returner's to send back
        self.returner: threading.Thread | None = None
        self.returning: list[Any] = []  # release calls the actor may not have run yet

    def acquire(self) -> None:
        if self.paced:
            ray.get(self.actor.acquire.remote(1))
            with self.cond:
                self.used += 1
            return
        with self.cond:
            while not self.free and self.asking:
                self.waiting += 1
                self.cond.wait()
                self.waiting -= 1
            if self.free:
                self.free -= 1
                self.used += 1
                return
            self.asking = True
            want = self.waiting + 1
        try:
            got: int = ray.get(self.actor.acquire.remote(want))
        except BaseException:
            with self.cond:
                self.asking = False
                self.cond.notify()
            raise
        with self.cond:
            self.asking = False
            self.free += got - 1
            self.used += 1
            surplus = self._surplus()
            # wake a thread for each free permit, and one more to ask for the rest
            self.cond.notify(self.free + (self.waiting > self.free))
            if surplus:
                self._give_back(surplus)

    def release(self) -> None:
        with self.cond:
            if self.paced:
                self._give_back(1)
            else:
                self.free += 1
                if self.waiting >= self.free:
                    self.cond.notify()
                elif not self.holding:
                    self.holding = True
                    if self.returner is None:
                        self.returner = threading.Thread(
                            target=self._return_held, name="composo-budget", daemon=True
                        )
                        self.returner.start()
                    self.due.notify()

    def _surplus(self) -> int:
        """Free permits no thread waits for, taken out to give back (lock held)."""
        surplus = max(0, self.free - self.waiting)
        self.free -= surplus
        return surplus

    def _return_held(self) -> None:
        while True:
            with self.cond:
                while not self.holding:
                    self.due.wait()
                end = time.monotonic() + self.HOLD
                while (left := end - time.monotonic()) > 0:
                    self.due.wait(left)
                self.holding = False
                surplus = self._surplus()
                if surplus:
                    self._give_back(surplus)

    def _give_back(self, count: int) -> None:
        """``count`` permits and the starts since the last report to the actor (lock held)."""
        used, self.used = self.used, 0
        self.returning.append(self.actor.release.remote(count, used))
        if len(self.returning) >= 64:  # forget the ones the actor has done
            _, pending = ray.wait(self.returning, num_returns=len(self.returning), timeout=0)
            self.returning = pending

    def hand_back(self) -> None:
        """Give back now the free permits nobody waits for, and report every start."""
        with self.cond:
            surplus = self._surplus()
            if surplus or self.used:
                self._give_back(surplus)

    def settle(self) -> None:
        """Wait until the actor has taken every permit given back (its calls run concurrently)."""
        self.hand_back()
        with self.cond:
            returning, self.returning = self.returning, []
        ray.get(returning)


class RequestBudget:
    """The cluster-wide limits, held by one Ray actor; pass it to :class:`ComposoBatch`.

    A busy worker hands freed permits straight to its waiting requests: a few actor calls per
    batch, not two per request (unless paced: every start is then on the actor's clock).

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
        self.max_concurrent_requests = max_concurrent_requests
        self.requests_per_minute = check_requests_per_minute(requests_per_minute)
        remote: Any = ray.remote  # its typed overloads do not cover actor options
        actor = remote(num_cpus=0, max_concurrency=10_000)(_Permits)
        if name is not None:
            actor = actor.options(name=name, get_if_exists=True)
        self.actor = actor.remote(max_concurrent_requests, self.requests_per_minute)
        self._share: _Share | None = None

    def __getstate__(self) -> dict[str, Any]:
        # What a worker receives: the limits and the actor, not this process's permits.
        return {**self.__dict__, "_share": None}

    def _local(self) -> _Share:
        share = self._share
        if share is not None:  # every request after the first, without the lock
            return share
        with _SHARING:
            if self._share is None:
                self._share = _Share(self.actor, self.requests_per_minute is not None)
            return self._share

    def acquire(self) -> None:
        """Wait for a permit (a request may start)."""
        self._local().acquire()

    def release(self) -> None:
        """Give a permit back (the request finished)."""
        self._local().release()

    def hand_back(self) -> None:
        """Give back now the permits held for no request (a batch ended; the process may stop)."""
        if self._share is not None:
            self._share.hand_back()

    def stats(self) -> dict[str, float]:
        """``in_flight``, ``peak``, permits ``granted``, ``seconds`` from the first permit to
        the last returned, and the actor's ``calls`` (what the budget costs)."""
        if self._share is not None:
            self._share.settle()
        out: dict[str, float] = ray.get(self.actor.stats.remote())
        return out


class ComposoBatch(BatchEvaluator):
    """What ``Dataset.map_batches`` calls: a batch in, the batch with its result columns out.

    Use it as the class (``ds.map_batches(ComposoBatch, fn_constructor_kwargs={...},
    compute=ray.data.ActorPoolStrategy(size=N), batch_format="pandas")``: one client per
    worker, kept across batches) or as an instance (a task per batch). Every argument of
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

    def _permits(self) -> RequestBudget | None:
        return self.budget

    def __call__(self, batch: Any) -> Any:
        """As :meth:`BatchEvaluator.__call__`; idle permits go back as the batch ends."""
        try:
            return super().__call__(batch)
        finally:
            if self.budget is not None:
                self.budget.hand_back()
