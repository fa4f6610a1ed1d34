"""Run calls on threads with a bounded number in flight, outcomes handed back as they finish.
When the caller stops early, the running calls are cancelled (:mod:`composo._core.cancel`) and
waited for briefly: no thread goes on working for a caller that left."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Generic, NamedTuple, TypeVar

from composo._core.cancel import Scope, within

T = TypeVar("T")
R = TypeVar("R")

CANCEL_GRACE = 1.0
"""Seconds a stopped run waits for its cancelled calls to end before leaving them."""


class Outcome(NamedTuple, Generic[R]):
    position: int
    value: R | None
    error: BaseException | None


def bounded(
    fn: Callable[[T], R],
    work: Iterable[T],
    window: int,
    *,
    pool: Executor | None = None,
    name: str = "composo",
) -> Generator[Outcome[R], None, None]:
    """``fn`` over ``work`` with at most ``window`` calls running; outcomes in finishing order.
    ``work`` is read only as places free up; a ``pool`` given is left open, else one is made
    for the run."""
    executor = pool if pool is not None else ThreadPoolExecutor(window, thread_name_prefix=name)
    done: queue.SimpleQueue[Outcome[R]] = queue.SimpleQueue()
    scope = Scope()
    running: dict[int, Future[None]] = {}

    def call(position: int, item: T) -> None:
        try:
            with within(scope):
                outcome = Outcome(position, fn(item), None)
        except BaseException as exc:  # handed back, or the reader would wait forever
            outcome = Outcome(position, None, exc)
        done.put(outcome)

    def take() -> Outcome[R]:
        outcome = done.get()
        running.pop(outcome.position, None)
        return outcome

    try:
        for position, item in enumerate(work):
            while len(running) >= window:
                yield take()
            running[position] = executor.submit(call, position, item)
        while running:
            yield take()
    finally:
        _stop(scope, running, done)
        if pool is None:
            executor.shutdown(wait=not running, cancel_futures=True)


def _stop(
    scope: Scope, running: dict[int, Future[None]], done: queue.SimpleQueue[Outcome[R]]
) -> None:
    """Cancel what is still running and wait up to :data:`CANCEL_GRACE` for it to end."""
    if not running:
        return
    for position in [p for p, future in running.items() if future.cancel()]:
        del running[position]  # never started
    scope.cancel()
    end = time.monotonic() + CANCEL_GRACE
    while running:
        try:
            outcome = done.get(timeout=max(0.0, end - time.monotonic()))
        except queue.Empty:
            return
        running.pop(outcome.position, None)
