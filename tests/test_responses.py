"""What the client accepts as an answer: bounded bodies, complete verdicts, task ids that stay one
path segment, and background submissions that a retry cannot duplicate."""

from __future__ import annotations

import gzip
import socket
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import pytest

from composo import AsyncComposo, Composo, ComposoValidationError, NotFoundError
from composo._core.limits import MAX_RESPONSE_BYTES
from composo.errors import ResponseTooLargeError, UnexpectedResponseError
from tests.support.loopback import Loopback, Seen, answer
from tests.support.servers import ServerProcess

QA = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]
CRITERION = "Reward accurate answers"
TRACE = {
    "root_agent_instance_id": "a",
    "agent_instance_by_id": {
        "a": {
            "id": "a",
            "name": "root",
            "interactions": [{"input_messages": QA[:1], "output_messages": [{"content": "Paris"}]}],
        }
    },
}


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """300 MiB of zeros, gzip-compressed to about 300 KiB."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1024 * 1024)
    parts = [packer.compress(block) for _ in range(300)]
    parts.append(packer.flush())
    return b"".join(parts)


def serving(body: bytes | dict[str, Any], headers: dict[str, str] | None = None) -> Loopback:
    def handler(sock: socket.socket, seen: Seen) -> None:
        answer(sock, body, headers=headers)

    return Loopback(handler)


def test_a_gzip_bomb_is_refused_without_inflating_in_memory(bomb: bytes) -> None:
    assert len(bomb) < 400 * 1024
    with (
        serving(bomb, {"Content-Encoding": "gzip"}) as srv,
        Composo(api_key="k", base_url=srv.url) as c,
    ):
        tracemalloc.start()
        try:
            with pytest.raises(ResponseTooLargeError, match="limit"):
                c.evaluate(messages=QA, criteria=CRITERION)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 4 * MAX_RESPONSE_BYTES  # far from the 300 MiB the body inflates to


async def test_async_client_refuses_a_gzip_bomb_too(bomb: bytes) -> None:
    with serving(bomb, {"Content-Encoding": "gzip"}) as srv:
        async with AsyncComposo(api_key="k", base_url=srv.url) as c:
            tracemalloc.start()
            try:
                with pytest.raises(ResponseTooLargeError):
                    await c.evaluate(messages=QA, criteria=CRITERION)
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
    assert peak < 4 * MAX_RESPONSE_BYTES


def test_a_plain_body_announced_over_the_limit_is_refused_and_not_retried() -> None:
    huge = b'{"score": 1, "explanation": "' + b"x" * (MAX_RESPONSE_BYTES + 10) + b'"}'
    with (
        serving(huge) as srv,
        Composo(api_key="k", base_url=srv.url) as c,
        pytest.raises(ResponseTooLargeError),
    ):
        c.evaluate(messages=QA, criteria=CRITERION)
    assert len(srv.seen) == 1


def test_a_compressed_answer_within_the_limit_is_read() -> None:
    body = gzip.compress(b'{"score": 0.75, "explanation": "fine"}')
    with (
        serving(body, {"Content-Encoding": "gzip"}) as srv,
        Composo(api_key="k", base_url=srv.url) as c,
    ):
        result = c.evaluate(messages=QA, criteria=CRITERION)
    assert (result.score, result.explanation) == (0.75, "fine")
    assert srv.seen[0].headers["accept-encoding"] == "gzip, deflate"


@pytest.mark.parametrize("body", [{}, {"explanation": "no score given"}])
def test_a_success_without_a_score_is_an_error_not_a_result(body: dict[str, Any]) -> None:
    with serving(body) as srv, Composo(api_key="k", base_url=srv.url) as c:
        with pytest.raises(UnexpectedResponseError, match="'score'"):
            c.evaluate(messages=QA, criteria=CRITERION)
        results = c.evaluate_many([{"messages": QA}], CRITERION)
    assert isinstance(results[0].error, UnexpectedResponseError)


def test_an_explicit_null_score_still_means_not_applicable() -> None:
    with (
        serving({"score": None, "explanation": "does not apply"}) as srv,
        Composo(api_key="k", base_url=srv.url) as c,
    ):
        result = c.evaluate(messages=QA, criteria=CRITERION)
    assert result.score is None and not result.applicable
    assert result.explanation == "does not apply"


async def test_a_trace_success_without_results_is_an_error() -> None:
    with serving({"request_id": "r1"}) as srv:
        async with AsyncComposo(api_key="k", base_url=srv.url) as c:
            with pytest.raises(UnexpectedResponseError, match="results_by_agent_name"):
                await c.evaluate_trace(TRACE, CRITERION)


@pytest.mark.parametrize(
    "task_id",
    ["../../../other", "a/b", "..", "", "  ", "x\r\nAPI-Key: stolen", "a\\b", "t" * 300],
)
def test_unusable_task_ids_are_refused_before_the_network(task_id: str) -> None:
    with serving({"detail": "nope"}) as srv, Composo(api_key="k", base_url=srv.url) as c:
        with pytest.raises(ComposoValidationError, match="task_id"):
            c.get_task(task_id)
        with pytest.raises(ComposoValidationError, match="task_id"):
            c.wait(task_id, timeout=1)
    assert srv.seen == []


async def test_async_get_task_refuses_a_path_and_a_non_string() -> None:
    async with AsyncComposo(api_key="k", base_url="http://127.0.0.1:9") as c:
        with pytest.raises(ComposoValidationError, match="task_id"):
            await c.get_task("../other")
        with pytest.raises(ComposoValidationError, match="task_id"):
            await c.get_task(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("task_id", "segment"), [("x?admin=1", "x%3Fadmin%3D1"), ("x#frag", "x%23frag")]
)
def test_task_ids_travel_as_one_path_segment(task_id: str, segment: str) -> None:
    def handler(sock: socket.socket, seen: Seen) -> None:
        answer(sock, {"detail": "no such task"}, "404 Not Found")

    with (
        Loopback(handler) as srv,
        Composo(api_key="k", base_url=srv.url) as c,
        pytest.raises(NotFoundError),
    ):
        c.get_task(task_id)
    assert srv.seen[0].path == f"/api/v1/evals/tasks/{segment}"


def test_a_task_id_with_a_query_reaches_the_server_as_the_id(
    client: Composo, live: ServerProcess
) -> None:
    with pytest.raises(NotFoundError):
        client.get_task("x?admin=1")
    (seen,) = live.requests()
    assert seen["path"] == "/api/v1/evals/tasks/x?admin=1"  # the id, decoded; no query


def losing_the_first_answer() -> Loopback:
    """A server that reads the first submission and hangs up without answering (the answer is
    lost), then answers every later one."""

    def handler(sock: socket.socket, seen: Seen) -> None:
        if seen.number == 0:
            sock.shutdown(socket.SHUT_RDWR)
            return
        answer(sock, {"task_id": f"task-{seen.headers.get('idempotency-key', 'none')}"})

    return Loopback(handler)


def test_a_retried_background_submission_repeats_its_idempotency_key() -> None:
    with losing_the_first_answer() as srv, Composo(api_key="k", base_url=srv.url) as c:
        out = c.evaluate(messages=QA, criteria=CRITERION, block=False)
        again = c.evaluate(messages=QA, criteria=CRITERION, block=False)
    first, retry, second = srv.seen
    key = first.headers["idempotency-key"]
    assert len(key) >= 16
    assert retry.headers["idempotency-key"] == key  # the retry is the same submission
    assert out == {"task_id": f"task-{key}"}
    assert second.headers["idempotency-key"] != key  # a new call is a new submission
    assert again["task_id"] != out["task_id"]


async def test_async_background_submissions_carry_one_key_each_and_blocking_ones_none() -> None:
    with losing_the_first_answer() as srv:
        async with AsyncComposo(api_key="k", base_url=srv.url) as c:
            outs = await c.evaluate(
                messages=QA, criteria=[CRITERION, "Reward brevity"], block=False
            )
    keys = [s.headers["idempotency-key"] for s in srv.seen]
    assert len(keys) == 3 and len(set(keys)) == 2  # two submissions, one of them retried
    assert {o["task_id"] for o in outs} == {f"task-{k}" for k in set(keys)}


def test_blocking_calls_send_no_idempotency_key(client: Composo, live: ServerProcess) -> None:
    client.evaluate(messages=QA, criteria=CRITERION)
    client.evaluate(messages=QA, criteria=CRITERION, block=False)
    blocking, background = live.requests()
    assert "idempotency-key" not in {h.lower() for h in blocking["headers"]}
    assert any(h.lower() == "idempotency-key" for h in background["headers"])


def test_a_gzip_bomb_is_refused_with_the_cache_on_too(bomb: bytes, tmp_path: Path) -> None:
    """The cache holds answers whole, so it reads them within the same limit first."""
    with (
        serving(bomb, {"Content-Encoding": "gzip"}) as srv,
        Composo(api_key="k", base_url=srv.url, cache=tmp_path) as c,
    ):
        tracemalloc.start()
        try:
            with pytest.raises(ResponseTooLargeError, match="limit"):
                c.evaluate(messages=QA, criteria=CRITERION)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 4 * MAX_RESPONSE_BYTES


async def test_async_client_with_the_cache_refuses_a_gzip_bomb(bomb: bytes, tmp_path: Path) -> None:
    with serving(bomb, {"Content-Encoding": "gzip"}) as srv:
        async with AsyncComposo(api_key="k", base_url=srv.url, cache=tmp_path) as c:
            tracemalloc.start()
            try:
                with pytest.raises(ResponseTooLargeError):
                    await c.evaluate(messages=QA, criteria=CRITERION)
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
    assert peak < 4 * MAX_RESPONSE_BYTES


def test_a_gzipped_answer_is_cached_decoded_and_served_again(tmp_path: Path) -> None:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = packer.compress(b'{"score": 0.75, "explanation": "Fine."}') + packer.flush()
    with (
        serving(body, {"Content-Encoding": "gzip"}) as srv,
        Composo(api_key="k", base_url=srv.url, cache=tmp_path) as c,
    ):
        first = c.evaluate(messages=QA, criteria=CRITERION)
        again = c.evaluate(messages=QA, criteria=CRITERION)
    assert first.score == again.score == 0.75 and again.explanation == "Fine."
    assert len(srv.seen) == 1  # the second answer came from the cache
