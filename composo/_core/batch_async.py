"""The async client's side of the batch engine: requests run as tasks on the caller's loop.

Kept apart so that importing the core (and the sync client) does not load asyncio.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from composo._core.batch import (
    BatchResult,
    Job,
    Plan,
    Progress,
    _finished,
    _Pending,
    _tick,
    jobs_from,
)

if TYPE_CHECKING:
    from composo._core.async_client import AsyncComposo

__all__ = ["ajobs_from", "astream"]


async def ajobs_from(items: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Job]:
    if isinstance(items, AsyncIterable):
        index = 0
        async for item in items:
            yield Job(index, item)
            index += 1
    else:
        for job in jobs_from(items):
            yield job


async def _run_async(client: AsyncComposo, p: _Pending) -> BatchResult:
    try:
        return _finished(p, await client._run_one(p.request, True))
    except Exception as exc:  # recorded on the result
        return _finished(p, error=exc)


async def astream(
    client: AsyncComposo,
    jobs: AsyncIterable[Job] | Iterable[Job],
    plan: Plan,
    window: int,
    progress: Progress | None = None,
) -> AsyncIterator[BatchResult]:
    """Results as they finish, with at most ``window`` requests in flight (tasks)."""
    running: set[asyncio.Task[None]] = set()
    finished: asyncio.Queue[BatchResult] = asyncio.Queue()
    in_flight = 0

    async def work(p: _Pending) -> None:
        finished.put_nowait(await _run_async(client, p))

    source = jobs if isinstance(jobs, AsyncIterable) else _as_async(jobs)
    if progress is not None:
        progress.start()
    try:
        async for job in source:
            for step in plan.expand(job):
                if isinstance(step, BatchResult):
                    _tick(progress)
                    yield step
                    continue
                while in_flight >= window:
                    in_flight -= 1
                    _tick(progress)
                    yield await finished.get()
                task = asyncio.ensure_future(work(step))
                running.add(task)  # a strong reference until it is done
                task.add_done_callback(running.discard)
                in_flight += 1
        while in_flight:
            in_flight -= 1
            _tick(progress)
            yield await finished.get()
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        if progress is not None:
            progress.close()


async def _as_async(jobs: Iterable[Job]) -> AsyncIterator[Job]:
    for job in jobs:
        yield job
