"""Retries and timeouts against the real server failing on purpose."""

from __future__ import annotations

import time

import pytest

from composo import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AsyncComposo,
    BadRequestError,
    Composo,
    MalformedError,
    RateLimitError,
)
from tests.support.servers import ServerProcess

QA = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]
CRITERION = "Reward accurate answers"


@pytest.fixture(autouse=True)
def _quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backoff between retries shrunk to a hundredth of a second: these tests count attempts and
    check Retry-After and timeouts, none of them how long a backoff is."""
    from composo._core import retry

    monkeypatch.setattr(retry, "BACKOFF_BASE", 0.01)


def make(live: ServerProcess, **kw: object) -> Composo:
    return Composo(api_key=live.api_key, base_url=live.base_url, **kw)  # type: ignore[arg-type]


def attempts(live: ServerProcess) -> int:
    return sum(1 for r in live.requests() if r["path"].startswith("/api/v1/evals/"))


def test_503_then_success(live: ServerProcess) -> None:
    live.fault({"status": 503, "detail": "overloaded"})
    with make(live) as c:
        assert c.evaluate(messages=QA, criteria=CRITERION).score is not None
    assert attempts(live) == 2


@pytest.mark.parametrize("status", [408, 409, 500, 502, 504, 524])
def test_retryable_statuses_are_retried(live: ServerProcess, status: int) -> None:
    live.fault({"status": status})
    with make(live) as c:
        c.evaluate(messages=QA, criteria=CRITERION)
    assert attempts(live) == 2


@pytest.mark.parametrize("status", [400, 403, 404, 413, 422])
def test_client_errors_are_never_retried(live: ServerProcess, status: int) -> None:
    live.fault({"status": status, "detail": "refused on purpose"})
    with make(live, num_retries=3) as c, pytest.raises(Exception) as info:
        c.evaluate(messages=QA, criteria=CRITERION)
    assert getattr(info.value, "status_code", None) == status
    assert "refused on purpose" in str(info.value)
    assert attempts(live) == 1


def test_error_classes_by_status(live: ServerProcess) -> None:
    live.fault({"status": 400}, {"status": 422})
    with make(live) as c:
        with pytest.raises(BadRequestError):
            c.evaluate(messages=QA, criteria=CRITERION)
        with pytest.raises(MalformedError):
            c.evaluate(messages=QA, criteria=CRITERION)


def test_num_retries_counts_retries_after_the_first_attempt(live: ServerProcess) -> None:
    live.fault(*({"status": 503} for _ in range(10)))
    with make(live, num_retries=3) as c, pytest.raises(APIError) as info:
        c.evaluate(messages=QA, criteria=CRITERION)
    assert info.value.status_code == 503
    assert attempts(live) == 4


def test_num_retries_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="num_retries"):
        Composo(api_key="k", num_retries=0)


def test_429_honours_retry_after_seconds(live: ServerProcess) -> None:
    live.fault({"status": 429, "retry_after": "1"})
    with make(live) as c:
        start = time.monotonic()
        c.evaluate(messages=QA, criteria=CRITERION)
        waited = time.monotonic() - start
    assert attempts(live) == 2
    assert waited >= 0.95  # the server asked for one second


def test_429_with_retry_after_as_http_date(live: ServerProcess) -> None:
    from email.utils import formatdate

    live.fault({"status": 429, "retry_after": formatdate(time.time() + 2, usegmt=True)})
    with make(live) as c:
        start = time.monotonic()
        c.evaluate(messages=QA, criteria=CRITERION)
        assert time.monotonic() - start >= 0.9
    assert attempts(live) == 2


def test_rate_limit_error_carries_retry_after(live: ServerProcess) -> None:
    live.fault(*({"status": 429, "retry_after": "0"} for _ in range(2)))
    with make(live) as c, pytest.raises(RateLimitError) as info:
        c.evaluate(messages=QA, criteria=CRITERION)
    assert info.value.retry_after == 0.0


def test_retry_after_longer_than_the_timeout_gives_up_early(live: ServerProcess) -> None:
    live.fault({"status": 429, "retry_after": "30"})
    with make(live, timeout=2.0) as c:
        start = time.monotonic()
        with pytest.raises(RateLimitError):
            c.evaluate(messages=QA, criteria=CRITERION)
        assert time.monotonic() - start < 2.0


def test_hanging_server_is_bounded_by_timeout(live: ServerProcess) -> None:
    live.fault({"delay": 10}, {"delay": 10})
    with make(live, timeout=0.75) as c:
        start = time.monotonic()
        with pytest.raises(APITimeoutError):
            c.evaluate(messages=QA, criteria=CRITERION)
        elapsed = time.monotonic() - start
    assert elapsed < 2.25  # the whole call, retries included, stays near the timeout


def test_dropped_connection_is_retried(live: ServerProcess) -> None:
    live.fault({"drop": True})
    with make(live) as c:
        assert c.evaluate(messages=QA, criteria=CRITERION).score is not None
    assert attempts(live) == 2  # the dropped attempt, then the retry


def test_dropped_every_time_is_a_connection_error(live: ServerProcess) -> None:
    live.fault(*({"drop": True} for _ in range(5)))
    with make(live, num_retries=2) as c, pytest.raises(APIConnectionError):
        c.evaluate(messages=QA, criteria=CRITERION)


def test_server_down_is_a_connection_error() -> None:
    from tests.support.servers import free_port

    c = Composo(api_key="k", base_url=f"http://127.0.0.1:{free_port()}", timeout=5)
    with c, pytest.raises(APIConnectionError, match="could not reach"):
        c.evaluate(messages=QA, criteria=CRITERION)


async def test_async_retries_and_timeout(live: ServerProcess) -> None:
    live.fault({"status": 503}, {"status": 429, "retry_after": "0.2"})
    async with AsyncComposo(api_key=live.api_key, base_url=live.base_url, num_retries=2) as c:
        assert (await c.evaluate(messages=QA, criteria=CRITERION)).score is not None
    assert attempts(live) == 3
    live.reset()
    live.fault({"delay": 10}, {"delay": 10})
    async with AsyncComposo(api_key=live.api_key, base_url=live.base_url, timeout=0.5) as c:
        start = time.monotonic()
        with pytest.raises(APITimeoutError):
            await c.evaluate(messages=QA, criteria=CRITERION)
        assert time.monotonic() - start < 2.0


def test_a_huge_error_body_is_cut_in_the_message_and_kept_whole(live: ServerProcess) -> None:
    page = "<html>" + "gateway trouble " * 500 + "</html>"  # as a proxy's error page might be
    live.fault({"status": 400, "detail": page})
    with make(live) as c, pytest.raises(BadRequestError) as info:
        c.evaluate(messages=QA, criteria=CRITERION)
    assert len(str(info.value)) < 700
    assert "truncated" in str(info.value)
    assert info.value.response_body == {"detail": page}
