"""Throttled runs slow down instead of failing: one limiter per client, Retry-After honoured with
jitter, a throttling budget separate from ``num_retries``, and pacing with
``requests_per_minute``."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from composo import (
    APIError,
    AsyncComposo,
    Composo,
    ComposoValidationError,
    RateLimitError,
)
from tests.support.cli import read_rows, run_composo
from tests.support.loopback import Loopback, Seen, answer
from tests.support.quota import NoQuotaHeaders
from tests.support.servers import ServerProcess

QA = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]
CRITERION = "Reward accurate answers"
PER_MINUTE = 600


@pytest.fixture(scope="module")
def limited() -> Iterator[ServerProcess]:
    """The local server allowing 600 requests a minute per key (a token bucket holding 20, so
    spending what it saved takes 20 requests, not a minute's 600)."""
    args = ["--rate-limit", f"{PER_MINUTE}/min", "--rate-burst", "20"]
    with ServerProcess(extra_args=args) as srv:
        yield srv


def spend_the_quota(srv: ServerProcess) -> None:
    """Use up what the bucket saved, so the next requests meet the limit at once."""
    with httpx.Client(base_url=srv.base_url, headers={"API-Key": srv.api_key}) as http:
        while http.post("/api/v1/evals/reward", json={}).status_code != 429:
            pass


def items(n: int) -> list[dict[str, object]]:
    return [
        {"id": f"q{i}", "messages": [QA[0], {**QA[1], "content": f"Paris, {i}."}]} for i in range(n)
    ]


@pytest.mark.slow
def test_a_batch_over_a_spent_quota_scores_every_item(limited: ServerProcess) -> None:
    spend_the_quota(limited)
    with (
        httpx.Client(transport=NoQuotaHeaders()) as blind,
        Composo(api_key=limited.api_key, base_url=limited.base_url, http_client=blind) as c,
    ):
        # More items than the bucket refills while the client starts: some meet the limit.
        results = c.evaluate_many(items(40), CRITERION, concurrency=5)
    assert [r.error for r in results if r.error is not None] == []
    assert all(r.score is not None for r in results)
    assert c.throttled > 0  # it was throttled, and slowed down instead of failing
    assert (c.pace() or "").startswith("throttled")  # what a progress line shows


@pytest.mark.slow  # waits for the spent quota to refill, as the batch above does
async def test_an_async_stream_over_a_spent_quota_scores_every_item(limited: ServerProcess) -> None:
    spend_the_quota(limited)
    async with AsyncComposo(
        api_key=limited.api_key, base_url=limited.base_url, max_concurrent_requests=8
    ) as c:
        results = [r async for r in c.evaluate_many_iter(items(6), [CRITERION, "Reward brevity"])]
    assert len(results) == 12 and all(r.ok for r in results)


def test_the_command_line_says_it_is_throttled_and_loses_nothing(
    live: ServerProcess, tmp_path: Path
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"messages": i["messages"]}) + "\n" for i in items(30)))
    out = tmp_path / "out.jsonl"
    # A server that declares no quota and refuses the first requests (as another process
    # sharing the key would make it): the run slows down and says so.
    live.fault(*({"status": 429, "retry_after": "0.2"} for _ in range(5)))
    done = run_composo(
        "evaluate",
        data,
        "-c",
        CRITERION,
        "-o",
        out,
        "--concurrency",
        "5",
        "--base-url",
        live.base_url,
        "--api-key",
        live.api_key,
    )
    assert done.returncode == 0, done.stderr
    rows = read_rows(out)
    assert len(rows) == 30 and all(r["error"] is None for r in rows)
    assert "throttled" in done.stderr and "/min" in done.stderr


def test_throttling_has_a_budget_of_its_own_in_batches(live: ServerProcess) -> None:
    live.fault(*({"status": 429, "retry_after": "0.1"} for _ in range(6)))
    # Room for ten requests in flight: the pace after a 429 starts from that, not from one a
    # second (the batch still sends one request at a time).
    with Composo(
        api_key=live.api_key, base_url=live.base_url, num_retries=1, max_concurrent_requests=10
    ) as c:
        results = c.evaluate_many(items(3), CRITERION, concurrency=1)
    assert all(r.ok for r in results)  # six 429s, more than num_retries allows one call
    assert len(live.requests()) == 9


def test_failures_still_use_num_retries_in_batches(live: ServerProcess) -> None:
    live.fault(*({"status": 503} for _ in range(3)))
    with Composo(api_key=live.api_key, base_url=live.base_url, num_retries=1) as c:
        results = c.evaluate_many(items(2), CRITERION, concurrency=1)
    assert isinstance(results[0].error, APIError) and results[1].ok


def test_a_retry_after_past_the_timeout_is_refused_at_once(live: ServerProcess) -> None:
    live.fault({"status": 429, "retry_after": "120", "detail": "quota spent"})
    with Composo(api_key=live.api_key, base_url=live.base_url, timeout=5) as c:
        start = time.monotonic()
        (result,) = c.evaluate_many(items(1), CRITERION)
        elapsed = time.monotonic() - start
    assert isinstance(result.error, RateLimitError)
    assert "120s" in str(result.error) and "timeout" in str(result.error)
    assert result.error.retry_after == 120.0
    assert elapsed < 5  # not waited out


async def test_async_single_call_refuses_a_retry_after_past_its_timeout(
    live: ServerProcess,
) -> None:
    live.fault({"status": 429, "retry_after": "120"})
    async with AsyncComposo(api_key=live.api_key, base_url=live.base_url, timeout=3) as c:
        with pytest.raises(RateLimitError, match="timeout leaves"):
            await c.evaluate(messages=QA, criteria=CRITERION)


def answering_429_first(items: int, retry_after: str = "1") -> Loopback:
    """Answers the first request of each of ``items`` items with 429 (Retry-After), all at once
    when every item's has arrived, every later one with a verdict; records when each request
    arrived."""
    first: set[str] = set()
    all_in = threading.Event()

    def handler(sock: socket.socket, seen: Seen) -> None:
        seen.headers["arrived"] = repr(time.monotonic())
        item = seen.json()["messages"][1]["content"]
        if item not in first:
            first.add(item)
            if len(first) == items:
                all_in.set()
            # Every worker told the same Retry-After together, on a loaded machine too (a
            # worker that started late would otherwise meet the hold before its first request).
            all_in.wait(10)
            answer(
                sock, {"detail": "slow down"}, "429 Too Many Requests", {"Retry-After": retry_after}
            )
            return
        answer(sock, {"score": 1.0, "explanation": "ok"})

    return Loopback(handler)


@pytest.mark.slow
def test_workers_told_the_same_retry_after_do_not_come_back_in_lockstep() -> None:
    with (
        answering_429_first(8) as srv,
        Composo(api_key="k", base_url=srv.url, max_concurrent_requests=8) as c,
    ):
        results = c.evaluate_many(items(8), CRITERION, concurrency=8)
    assert all(r.ok for r in results)
    retries = sorted(float(s.headers["arrived"]) for s in srv.seen[8:])
    firsts = sorted(float(s.headers["arrived"]) for s in srv.seen[:8])
    assert len(retries) == 8
    assert retries[0] - firsts[0] >= 0.95  # Retry-After was honoured...
    assert retries[-1] - retries[0] >= 0.3  # ...and the retries were spread out, not at once


def test_requests_per_minute_paces_from_the_first_request() -> None:
    def handler(sock: socket.socket, seen: Seen) -> None:
        seen.headers["arrived"] = repr(time.monotonic())
        answer(sock, {"score": 1.0, "explanation": "ok"})

    with (
        Loopback(handler) as srv,
        Composo(api_key="k", base_url=srv.url, requests_per_minute=300) as c,
    ):
        results = c.evaluate_many(items(6), CRITERION, concurrency=5)
    assert all(r.ok for r in results)
    arrived = sorted(float(s.headers["arrived"]) for s in srv.seen)
    assert arrived[-1] - arrived[0] >= 0.7  # 300 a minute: one every 0.2 s, never a burst


async def test_async_requests_per_minute_paces_too() -> None:
    def handler(sock: socket.socket, seen: Seen) -> None:
        seen.headers["arrived"] = repr(time.monotonic())
        answer(sock, {"score": 1.0, "explanation": "ok"})

    with Loopback(handler) as srv:
        async with AsyncComposo(api_key="k", base_url=srv.url, requests_per_minute=300) as c:
            await c.evaluate(messages=QA, criteria=[f"Reward aspect {i}" for i in range(6)])
    arrived = sorted(float(s.headers["arrived"]) for s in srv.seen)
    assert arrived[-1] - arrived[0] >= 0.7  # one every 0.2 s


def test_a_spent_quota_announced_on_a_success_holds_the_next_request() -> None:
    def handler(sock: socket.socket, seen: Seen) -> None:
        seen.headers["arrived"] = repr(time.monotonic())
        extra = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1"} if seen.number == 0 else {}
        answer(sock, {"score": 1.0, "explanation": "ok"}, headers=extra)

    with Loopback(handler) as srv, Composo(api_key="k", base_url=srv.url) as c:
        c.evaluate(messages=QA, criteria=CRITERION)
        c.evaluate(messages=QA, criteria=CRITERION)
    first, second = (float(s.headers["arrived"]) for s in srv.seen)
    assert second - first >= 0.95


def test_a_429_without_retry_after_reads_the_rate_limit_reset() -> None:
    def handler(sock: socket.socket, seen: Seen) -> None:
        seen.headers["arrived"] = repr(time.monotonic())
        if seen.number == 0:
            headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1"}
            answer(sock, {"detail": "quota"}, "429 Too Many Requests", headers)
            return
        answer(sock, {"score": 1.0, "explanation": "ok"})

    with Loopback(handler) as srv, Composo(api_key="k", base_url=srv.url) as c:
        (result,) = c.evaluate_many(items(1), CRITERION)
    assert result.ok
    first, second = (float(s.headers["arrived"]) for s in srv.seen)
    assert second - first >= 0.95


@pytest.mark.parametrize("value", [0, -5, "600", True])
def test_requests_per_minute_must_be_a_positive_number(value: object) -> None:
    with pytest.raises(ComposoValidationError, match="requests_per_minute"):
        Composo(api_key="k", requests_per_minute=value)  # type: ignore[arg-type]
    with pytest.raises(ComposoValidationError, match="requests_per_minute"):
        AsyncComposo(api_key="k", requests_per_minute=value)  # type: ignore[arg-type]


@pytest.mark.slow  # waits for the spent quota to refill
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_background_evaluation_of_integrations_waits_out_throttling(
    limited: ServerProcess, kind: str
) -> None:
    from composo.ext import BackgroundEvaluator

    factory = Composo if kind == "sync" else AsyncComposo
    evaluator = BackgroundEvaluator(
        [CRITERION], client=factory(api_key=limited.api_key, base_url=limited.base_url)
    )
    spend_the_quota(limited)
    try:
        for i in range(6):
            evaluator.submit(f"run-{i}", "evaluate", lambda: {"messages": QA})
        assert evaluator.flush(timeout=60)
    finally:
        evaluator.close()
    assert evaluator.stats == {"completed": 6, "failed": 0, "pending": 0}


def test_a_paced_request_that_cannot_go_within_its_timeout_fails_at_once() -> None:
    from composo import APITimeoutError

    def handler(sock: socket.socket, seen: Seen) -> None:
        answer(sock, {"score": 1.0, "explanation": "ok"})

    with (
        Loopback(handler) as srv,
        Composo(api_key="k", base_url=srv.url, requests_per_minute=6, timeout=2) as c,
    ):
        c.evaluate(messages=QA, criteria=CRITERION)  # the first goes at once
        start = time.monotonic()
        with pytest.raises(APITimeoutError, match="pace"):
            c.evaluate(messages=QA, criteria=CRITERION)  # the next may go in 10 s
        assert time.monotonic() - start < 2
    assert len(srv.seen) == 1
