"""``timeout`` bounds the whole call, even against a server that sends one byte at a time."""

from __future__ import annotations

import socket
import time

import pytest

from composo import APITimeoutError, AsyncComposo, Composo
from tests.support.loopback import Loopback, Seen, drip

QA = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]
CRITERION = "Reward accurate answers"
TIMEOUT = 0.6
MARGIN = 2.0  # generous: the call must end near its timeout, not when the server gives up

BODY = b'{"score": 0.9, "explanation": "' + b"x" * 400 + b'"}'
HEAD = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n"
WHERE = {
    "status line": HEAD.encode() + BODY,
    "headers": HEAD.encode()[:20] + b"X-Slow: " + b"a" * 200 + b"\r\n" + HEAD.encode()[20:] + BODY,
    "body": BODY,
}


def dripping(where: str) -> Loopback:
    """A server whose answer trickles in, one byte every 0.05 s (a whole answer takes over 20 s)."""

    def handler(sock: socket.socket, seen: Seen) -> None:
        if where == "body":  # the status line and headers at once, then the body drips
            sock.sendall(HEAD.encode())
        drip(sock, WHERE[where], 0.05, server.stop)

    server = Loopback(handler)
    return server


@pytest.mark.parametrize("where", list(WHERE))
def test_sync_call_ends_at_its_timeout_however_slowly_the_server_sends(where: str) -> None:
    with dripping(where) as srv, Composo(api_key="k", base_url=srv.url, timeout=TIMEOUT) as c:
        start = time.monotonic()
        with pytest.raises(APITimeoutError):
            c.evaluate(messages=QA, criteria=CRITERION)
        elapsed = time.monotonic() - start
    assert elapsed < TIMEOUT + MARGIN
    assert len(srv.seen) >= 1  # it did reach the server; the answer was what was slow


@pytest.mark.parametrize("where", list(WHERE))
async def test_async_call_ends_at_its_timeout_however_slowly_the_server_sends(where: str) -> None:
    with dripping(where) as srv:
        async with AsyncComposo(api_key="k", base_url=srv.url, timeout=TIMEOUT) as c:
            start = time.monotonic()
            with pytest.raises(APITimeoutError):
                await c.evaluate(messages=QA, criteria=CRITERION)
            elapsed = time.monotonic() - start
    assert elapsed < TIMEOUT + MARGIN


def test_several_criteria_share_one_bound_per_call() -> None:
    with (
        dripping("body") as srv,
        Composo(api_key="k", base_url=srv.url, timeout=TIMEOUT, max_concurrent_requests=2) as c,
    ):
        start = time.monotonic()
        with pytest.raises(APITimeoutError):
            c.evaluate(messages=QA, criteria=[CRITERION, "Reward brevity"])
        assert time.monotonic() - start < TIMEOUT + MARGIN


def test_a_batch_records_timeouts_and_ends_near_the_timeout() -> None:
    with dripping("headers") as srv, Composo(api_key="k", base_url=srv.url, timeout=TIMEOUT) as c:
        start = time.monotonic()
        results = c.evaluate_many([{"messages": QA}] * 3, CRITERION, concurrency=3)
        elapsed = time.monotonic() - start
    assert [type(r.error) for r in results] == [APITimeoutError] * 3
    assert elapsed < TIMEOUT + MARGIN
