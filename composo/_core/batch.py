"""The batch engine on threads: items read lazily, a bounded window in flight, one item's failure
recorded without stopping the others, memory flat. It takes a send function and knows no client;
the async form is :mod:`composo._core.batch_async`, what both share :mod:`composo._core.plan`."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable

from composo._core.cancel import Cancelled
from composo._core.plan import (
    BatchResult,
    Job,
    Pending,
    Plan,
    Progress,
    Request,
    Response,
    finished,
    tick,
)
from composo._core.runner import bounded

Send = Callable[[Request], Response]


def stream(
    send: Send,
    jobs: Iterable[Job],
    plan: Plan,
    window: int,
    progress: Progress | None = None,
) -> Generator[BatchResult, None, None]:
    """Results as they finish, with at most ``window`` calls of ``send`` in flight (threads)."""

    def run(step: Pending | BatchResult) -> BatchResult:
        if isinstance(step, BatchResult):  # an item that could not be used
            return step
        try:
            return finished(step, send(step.request))
        except Cancelled:  # the caller left: nothing to record
            raise
        except Exception as exc:  # recorded on the result
            return finished(step, error=exc)

    steps = (step for job in jobs for step in plan.expand(job))
    if progress is not None:
        progress.start()
    outcomes = bounded(run, steps, window, name="composo-batch")
    try:
        for outcome in outcomes:
            tick(progress)
            if outcome.value is None:  # run() itself was interrupted
                raise outcome.error or AssertionError("no result")
            yield outcome.value
    finally:
        outcomes.close()  # stopped early: what is still running is cancelled
        if progress is not None:
            progress.close()
