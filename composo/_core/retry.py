"""Retry policy, in one place: what to retry, how long to wait, when to give up."""

from __future__ import annotations

import email.utils
import logging
import random
import time
from typing import TYPE_CHECKING, Any

import httpx

from composo.errors import APIConnectionError, APIStatusError

if (
    TYPE_CHECKING
):  # tenacity (and the asyncio it pulls in) loads on the first request, not at import
    from tenacity import AsyncRetrying, RetryCallState, Retrying

__all__ = ["RETRYABLE_STATUS", "async_retrying", "is_retryable", "parse_retry_after", "retrying"]

_log = logging.getLogger("composo")

RETRYABLE_STATUS = frozenset({408, 409, 429})
_MAX_RETRY_AFTER = 60.0
_BACKOFF_BASE = 0.5
_BACKOFF_MAX = 8.0


def is_retryable(exc: BaseException) -> bool:
    """Only what may succeed on a second try: lost connections, timeouts, 408/409/429 and 5xx."""
    if isinstance(exc, APIConnectionError):
        return True
    if isinstance(exc, APIStatusError) and exc.status_code is not None:
        return exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500
    return False


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """``Retry-After`` as seconds (it may be a number of seconds or an HTTP date)."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _wait(state: RetryCallState) -> float:
    exc = state.outcome.exception() if state.outcome else None
    advised = getattr(exc, "retry_after", None)
    if isinstance(advised, (int, float)):
        return min(float(advised), _MAX_RETRY_AFTER)
    # Exponential backoff with full jitter.
    ceiling = min(_BACKOFF_MAX, _BACKOFF_BASE * 2 ** (state.attempt_number - 1))
    return random.uniform(0, ceiling)


def _log_retry(state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    _log.info(
        "composo: attempt %d failed (%s); retrying in %.2fs",
        state.attempt_number,
        exc.__class__.__name__ if exc else "?",
        state.upcoming_sleep,
    )


def _policy(num_retries: int, timeout: float) -> dict[str, Any]:
    from tenacity import retry_if_exception, stop_after_attempt, stop_before_delay

    return {
        "retry": retry_if_exception(is_retryable),
        # Give up after the retries, or before a wait that would overrun the call's timeout.
        "stop": stop_after_attempt(num_retries + 1) | stop_before_delay(timeout),
        "wait": _wait,
        "before_sleep": _log_retry,
        "reraise": True,
    }


def retrying(num_retries: int, timeout: float) -> Retrying:
    from tenacity import Retrying

    return Retrying(**_policy(num_retries, timeout))


def async_retrying(num_retries: int, timeout: float) -> AsyncRetrying:
    from tenacity import AsyncRetrying

    return AsyncRetrying(**_policy(num_retries, timeout))
