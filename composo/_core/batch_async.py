"""The batch engine as tasks on the caller's event loop (apart, so the sync client never loads
asyncio); the same plan as the thread form."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from composo._core import plan as shared
from composo._core.plan import BatchResult, Job, Plan, Progress

ASend = Callable[[shared.Request], Awaitable[shared.Response]]


async def ajobs_from(items: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Job]:
    """Each item at its position, from a plain or an async iterable; nothing is read ahead."""
    if isinstance(items, AsyncIterable):
        index = 0
        async for item in items:
            yield Job(index, item)
            index += 1
    else:
        for job in shared.jobs_from(items):
            yield job


async def astream(
    send: ASend,
    jobs: AsyncIterable[Job],
    plan: Plan,
    window: int,
    progress: Progress | None = None,
    on_result: Callable[[BatchResult], None] | None = None,
) -> AsyncIterator[BatchResult]:
    """Results as they finish, with at most ``window`` calls of ``send`` in flight (tasks);
    ``on_result`` sees each the moment it is ready, even while the engine waits for a job."""
    running: set[asyncio.Task[None]] = set()
    done: asyncio.Queue[BatchResult] = asyncio.Queue()
    in_flight = 0

    async def work(p: shared.Pending) -> None:
        try:
            result = shared.finished(p, await send(p.request))
        except Exception as exc:  # recorded on the result
            result = shared.finished(p, error=exc)
        if on_result is not None:
            on_result(result)
        done.put_nowait(result)

    if progress is not None:
        progress.start()
    try:
        async for job in jobs:
            for step in plan.expand(job):
                if isinstance(step, BatchResult):
                    if on_result is not None:
                        on_result(step)
                    shared.tick(progress)
                    yield step
                    continue
                while in_flight >= window:
                    in_flight -= 1
                    shared.tick(progress)
                    yield await done.get()
                task = asyncio.ensure_future(work(step))
                running.add(task)  # a strong reference until it is done
                task.add_done_callback(running.discard)
                in_flight += 1
        while in_flight:
            in_flight -= 1
            shared.tick(progress)
            yield await done.get()
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        if progress is not None:
            progress.close()
