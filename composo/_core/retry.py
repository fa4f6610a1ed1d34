"""Retry policy, in one place (both clients and the local server's OpenAI judge): what to retry,
how long to wait, when to give up. The numbers are in :mod:`composo._core.limits`."""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from composo._core.limits import BACKOFF_BASE, BACKOFF_MAX, MAX_RETRY_AFTER, RETRYABLE_STATUS
from composo.errors import APIConnectionError, APIStatusError

if TYPE_CHECKING:  # tenacity (and the asyncio it pulls in) loads on the first request
    from tenacity import AsyncRetrying, RetryCallState, Retrying

_log = logging.getLogger("composo")


def is_retryable(exc: BaseException) -> bool:
    """Only what may succeed on a second try: lost connections, timeouts, 408/409/429 and 5xx."""
    if isinstance(exc, APIConnectionError):
        return True
    if isinstance(exc, APIStatusError) and exc.status_code is not None:
        return exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500
    return False


def _seconds(value: str, scale: float = 1.0) -> float | None:
    try:
        seconds = float(value) / scale
    except ValueError:
        return None
    return None if math.isnan(seconds) else max(0.0, seconds)


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """``Retry-After`` as seconds (a number of seconds or an HTTP date; ``retry-after-ms``
    first), or ``None`` when absent or unreadable. ``headers`` is case-insensitive, as
    ``httpx.Headers`` is."""
    value = (headers.get("retry-after-ms") or "").strip()
    if value and (seconds := _seconds(value, 1000.0)) is not None:
        return seconds
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:
        import email.utils  # only for the rare HTTP-date form (it costs ~10 ms to import)

        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _waiter(max_retry_after: float) -> Any:
    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        advised = getattr(exc, "retry_after", None)
        if isinstance(advised, (int, float)):
            return min(float(advised), max_retry_after)
        # Exponential backoff with full jitter.
        ceiling = min(BACKOFF_MAX, BACKOFF_BASE * 2 ** (state.attempt_number - 1))
        return random.uniform(0, ceiling)

    return wait


def _log_retry(state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    _log.info(
        "composo: attempt %d failed (%s); retrying in %.2fs",
        state.attempt_number,
        exc.__class__.__name__ if exc else "?",
        state.upcoming_sleep,
    )


def _stop(num_retries: int, timeout: float | None) -> Any:
    """Give up after the retries, or before a wait that would end past ``timeout`` seconds."""
    from tenacity import stop_after_attempt, stop_before_delay

    stop = stop_after_attempt(num_retries + 1)
    return stop if timeout is None else stop | stop_before_delay(timeout)


def _policy(num_retries: int, max_retry_after: float) -> dict[str, Any]:
    from tenacity import retry_if_exception

    return {
        "retry": retry_if_exception(is_retryable),
        "stop": _stop(num_retries, None),
        "wait": _waiter(max_retry_after),
        "before_sleep": _log_retry,
        "reraise": True,
    }


def async_retrying(num_retries: int, *, max_retry_after: float = MAX_RETRY_AFTER) -> AsyncRetrying:
    """The policy for a coroutine: ``num_retries`` after the first attempt."""
    from tenacity import AsyncRetrying

    return AsyncRetrying(**_policy(num_retries, max_retry_after))


def _replay(first: BaseException, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, its first call raising ``first``: the policy counts the attempt made before it
    loaded, and waits as that failure asks."""
    pending = [first]

    def attempt(*args: Any) -> Any:
        if pending:
            raise pending.pop()
        return fn(*args)

    return attempt


def _areplay(first: BaseException, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    """:func:`_replay` for a coroutine function."""
    pending = [first]

    async def attempt(*args: Any) -> Any:
        if pending:
            raise pending.pop()
        return await fn(*args)

    return attempt


class Policy:
    """One client's retry policy, built on the first failure (tenacity loads only then) and
    copied per call: ``Retry-After`` is waited in full, never past the call's deadline."""

    def __init__(self, num_retries: int) -> None:
        self.num_retries = num_retries
        self._sync: Retrying | None = None
        self._async: AsyncRetrying | None = None

    def sync(
        self, deadline: float, first: BaseException, fn: Callable[..., Any], *args: Any
    ) -> Any:
        """Retry ``fn(*args)``, whose first attempt failed with ``first``, by ``deadline``
        (``time.monotonic()``)."""
        if self._sync is None:
            from tenacity import Retrying

            self._sync = Retrying(**_policy(self.num_retries, math.inf))
        from composo._core.cancel import sleep  # cut short when the caller leaves

        left = deadline - time.monotonic()  # the retries start now
        retrying = self._sync.copy(stop=_stop(self.num_retries, left), sleep=sleep)
        return retrying(_replay(first, fn), *args)

    async def asynchronous(
        self, deadline: float, first: BaseException, fn: Callable[..., Awaitable[Any]], *args: Any
    ) -> Any:
        """:meth:`sync` for a coroutine function."""
        if self._async is None:
            self._async = async_retrying(self.num_retries, max_retry_after=math.inf)
        retrying = self._async.copy(stop=_stop(self.num_retries, deadline - time.monotonic()))
        return await retrying(_areplay(first, fn), *args)
