"""Run calls on threads with a bounded number in flight, handing outcomes back as they finish.

The one way blocking work runs concurrently in the core: the sync client's several-criteria call
and the thread form of the batch engine both use it (coroutines use
:func:`composo._core.batch_async.astream`).
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Generic, NamedTuple, TypeVar

__all__ = ["Outcome", "bounded"]

T = TypeVar("T")
R = TypeVar("R")


class Outcome(NamedTuple, Generic[R]):
    """What one call gave: its position in the work, and its value or the exception it raised."""

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
) -> Iterator[Outcome[R]]:
    """``fn`` over ``work`` with at most ``window`` calls running; outcomes in finishing order.

    ``work`` is read only as places free up, so a long generator is never held in memory. A
    ``pool`` given is used and left open; otherwise one is made for this run and shut down when
    the iterator is exhausted or closed (calls not started by then are cancelled).
    """
    executor = pool if pool is not None else ThreadPoolExecutor(window, thread_name_prefix=name)
    done: queue.SimpleQueue[Outcome[R]] = queue.SimpleQueue()

    def call(position: int, item: T) -> None:
        try:
            done.put(Outcome(position, fn(item), None))
        except BaseException as exc:  # handed back, or the reader would wait forever
            done.put(Outcome(position, None, exc))

    in_flight = 0
    try:
        for position, item in enumerate(work):
            while in_flight >= window:
                in_flight -= 1
                yield done.get()
            executor.submit(call, position, item)
            in_flight += 1
        while in_flight:
            in_flight -= 1
            yield done.get()
    finally:
        if pool is None:
            executor.shutdown(wait=False, cancel_futures=True)
