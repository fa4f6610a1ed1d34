"""Both clients' account and history methods and ``composo history`` / ``composo usage``, against
a local server with a rate limit of 1,200 a minute (and, for what only the hosted platform could
do, a scripted loopback server at the HTTP boundary)."""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from composo import AsyncComposo, Composo
from composo.errors import ComposoValidationError, NotFoundError, UnexpectedResponseError
from composo.types import EvaluationRecord, RateLimits, TraceRecord, Usage
from tests.support.cli import clean_env, run_cli
from tests.support.loopback import Loopback, Seen, answer
from tests.support.servers import HTTP, ServerProcess, free_port

KEY = "platform-client-key-0123"
CONCISE = "Reward responses that are concise"
POLITE = "Reward responses that are polite"
MESSAGES = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
]


@pytest.fixture(scope="module")
def srv() -> Iterator[ServerProcess]:
    with ServerProcess(api_keys=(KEY,), extra_args=("--rate-limit", "1200/min")) as server:
        yield server


@pytest.fixture
def client(srv: ServerProcess) -> Iterator[Composo]:
    with Composo(api_key=KEY, base_url=srv.base_url) as c:
        yield c


def four_evaluations(client: Composo) -> str:
    """Four evaluations, three of them tagged ``run=<new id>``; returns the id."""
    run = uuid.uuid4().hex[:12]
    client.evaluate(messages=MESSAGES, criteria=CONCISE, tags={"run": run})
    client.evaluate(messages=MESSAGES, criteria=POLITE, tags={"run": run})
    client.evaluate(messages=MESSAGES, criteria=CONCISE, tags={"run": run})
    client.evaluate(messages=MESSAGES, criteria=CONCISE, tags={"run": "other"})
    return run


def test_usage_rate_limits_and_the_tagged_history(client: Composo, tmp_path: Path) -> None:
    run = four_evaluations(client)
    usage = client.usage()
    assert isinstance(usage, Usage)
    assert usage.usage.total_current_request_count >= 4
    limits = client.rate_limits()
    assert isinstance(limits, RateLimits)
    assert limits.requests_per_minute == 1200
    assert 0 <= limits.remaining <= 1200

    tagged = list(client.list_evaluations(tags={"run": run}))
    assert len(tagged) == 3
    assert all(isinstance(e, EvaluationRecord) and e.tags["run"] == run for e in tagged)
    assert sorted(e.criterion or "" for e in tagged) == [CONCISE, CONCISE, POLITE]

    out = tmp_path / "history.jsonl"
    env = clean_env(COMPOSO_API_KEY=KEY, COMPOSO_BASE_URL=client.base_url)
    done = run_cli("history", "--tag", f"run={run}", "-o", out, env=env)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3
    assert sorted(r["criterion"] for r in rows) == [CONCISE, CONCISE, POLITE]
    assert all(r["tags"] == {"run": run} and r["model"] == "align-20251111" for r in rows)


def test_history_pages_lazily(client: Composo, srv: ServerProcess) -> None:
    run = uuid.uuid4().hex[:12]
    client.evaluate_many([{"messages": MESSAGES, "tags": {"run": run}}] * 5, CONCISE)
    history = client.list_evaluations(tags={"run": run}, page_size=2)
    pages = history.pages()
    first = next(pages)
    assert (first.total, first.total_pages, len(first.evaluations)) == (5, 3, 2)
    assert len({e.id for e in history}) == 5  # iterating again asks again, all pages


def test_history_as_data_frames(client: Composo) -> None:
    run = four_evaluations(client)
    frame = client.list_evaluations(tags={"run": run}, criteria=CONCISE).to_pandas()
    assert list(frame.columns)[:6] == ["id", "created_at", "criterion", "score", "tags", "model"]
    assert len(frame) == 2 and set(frame["criterion"]) == {CONCISE}
    assert frame["score"].between(0, 1).all() and frame["latency_ms"].ge(0).all()
    polars = client.list_evaluations(tags={"run": run}).to_polars()
    assert polars.height == 3 and "tags" in polars.columns
    empty = client.list_evaluations(tags={"run": "nothing-" + run}).to_pandas()
    assert len(empty) == 0 and "score" in empty.columns


def test_history_as_parquet_and_since(client: Composo, tmp_path: Path) -> None:
    pyarrow = pytest.importorskip("pyarrow.parquet")
    run = four_evaluations(client)
    env = clean_env(COMPOSO_API_KEY=KEY, COMPOSO_BASE_URL=client.base_url)
    out = tmp_path / "h.parquet"
    done = run_cli("history", "--tag", f"run={run}", "--criterion", POLITE, "-o", out, env=env)
    assert done.returncode == 0, done.stderr
    table = pyarrow.read_table(out).to_pylist()
    assert [(r["criterion"], json.loads(r["tags"])) for r in table] == [(POLITE, {"run": run})]
    later = tmp_path / "later.jsonl"
    done = run_cli("history", "--tag", f"run={run}", "--since", "2999-01-01", "-o", later, env=env)
    assert done.returncode == 0 and later.read_text() == ""


def test_usage_command_prints_a_table(client: Composo) -> None:
    client.evaluate(messages=MESSAGES, criteria=CONCISE)
    env = clean_env(COMPOSO_API_KEY=KEY, COMPOSO_BASE_URL=client.base_url)
    done = run_cli("usage", env=env)
    assert done.returncode == 0, done.stderr
    assert "requests this month" in done.stdout
    assert "1200/min" in done.stdout
    assert "align-20251111" in done.stdout


def name_trace(srv: ServerProcess, trace_id: str) -> None:
    """An evaluation naming a trace, as any platform client may send it."""
    body = {"messages": MESSAGES, "evaluation_criteria": CONCISE, "trace_id": trace_id}
    r = HTTP.post(srv.base_url + "/api/v1/evals/reward", json=body, headers={"API-Key": KEY})
    assert r.status_code == 200, r.text


def test_traces_by_id_and_by_page(client: Composo, srv: ServerProcess) -> None:
    trace_id = str(uuid.uuid4())
    name_trace(srv, trace_id)
    got = client.get_trace(trace_id)
    assert isinstance(got, TraceRecord) and got.id == trace_id
    assert [e.criteria for e in got.evaluations] == [CONCISE]
    listed = [t.id for t in client.list_traces(page_size=1, start_date="2000-01-01T00:00:00Z")]
    assert trace_id in listed and len(listed) == len(set(listed))
    with pytest.raises(NotFoundError):
        client.get_trace(uuid.uuid4())


async def test_the_async_client_has_the_same_methods(srv: ServerProcess) -> None:
    async with AsyncComposo(api_key=KEY, base_url=srv.base_url) as client:
        run = uuid.uuid4().hex[:12]
        for criterion in (CONCISE, POLITE, CONCISE):
            await client.evaluate(messages=MESSAGES, criteria=criterion, tags={"run": run})
        assert (await client.usage()).usage.total_current_request_count >= 3
        limits = await client.rate_limits()
        assert limits is not None and limits.requests_per_minute == 1200
        history = client.list_evaluations(tags={"run": run}, page_size=2)
        got = [e.criterion or "" async for e in history]
        assert sorted(got) == [CONCISE, CONCISE, POLITE]
        frame = await history.to_pandas()
        assert len(frame) == 3
        trace_id = str(uuid.uuid4())
        name_trace(srv, trace_id)
        assert (await client.get_trace(trace_id)).id == trace_id
        assert trace_id in [t.id async for t in client.list_traces()]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"tags": ["run", "x"]}, "tags"),
        ({"tags": {"run": 3}}, "tags['run']"),
        ({"tags": {"run": []}}, "tags['run']"),
        ({"tags": {"": "x"}}, "tags"),
        ({"criteria": []}, "criteria"),
        ({"endpoint": "chat"}, "endpoint"),
        ({"page_size": 0}, "page_size"),
    ],
)
def test_bad_history_arguments_fail_before_any_request(kwargs: dict[str, Any], field: str) -> None:
    # Nothing listens on this port: a request would fail with a connection error instead.
    with Composo(api_key=KEY, base_url=f"http://127.0.0.1:{free_port()}") as client:
        with pytest.raises(ComposoValidationError) as caught:
            client.list_evaluations(**kwargs)
        assert str(caught.value).startswith(field)
        with pytest.raises(ComposoValidationError, match="trace_id"):
            client.get_trace("not-a-uuid")
        with pytest.raises(ComposoValidationError, match="page_size"):
            client.list_traces(page_size=501)
        with pytest.raises(ComposoValidationError, match="start_date"):
            client.list_traces(start_date="yesterday")


def test_the_request_carries_only_the_fields_that_are_set() -> None:
    seen: list[Seen] = []

    def handle(sock: socket.socket, request: Seen) -> None:
        seen.append(request)
        answer(sock, {"evaluations": [], "total": 0, "page": 1, "page_size": 100, "total_pages": 0})

    with Loopback(handle) as platform, Composo(api_key=KEY, base_url=platform.url) as client:
        assert list(client.list_evaluations(tags={"run": "x"})) == []
        assert list(client.list_evaluations(criteria=CONCISE, endpoint="trace")) == []
    assert [s.json() for s in seen] == [
        {"filters": [{"key": "run", "values": ["x"]}], "page": 1},
        {"criteria_filter": {"values": [CONCISE]}, "endpoint_type": "trace", "page": 1},
    ]
    assert all(s.path == "/api/v1/evaluations/filter" and s.headers["api-key"] == KEY for s in seen)


def test_fields_the_platform_adds_are_kept_and_a_wrong_shape_is_named() -> None:
    bodies: list[dict[str, Any]] = [
        {
            "usage": {
                "monthly_token_quota": 1000,
                "models": {"align-20251111": {"tokens": 5}},
                "total_current_request_count": 2,
                "total_current_token_count": 5,
                "credits_left": 7.5,
            },
            "quota_reset_date": "2030-01-01",
            "plan": "team",
        },
        {"usage": "not an object"},
    ]

    def handle(sock: socket.socket, request: Seen) -> None:
        answer(sock, bodies[request.number % len(bodies)])

    with Loopback(handle) as platform, Composo(api_key=KEY, base_url=platform.url) as client:
        usage = client.usage()
        assert usage.model_extra == {"plan": "team"}
        assert usage.usage.model_extra == {"credits_left": 7.5}
        with pytest.raises(UnexpectedResponseError, match="usage"):
            client.usage()


@pytest.mark.slow
def test_a_batch_paces_itself_to_the_declared_quota_and_draws_no_429() -> None:
    """600 a minute with a burst of 10: the first answers declare the quota, and the 40 items
    go 10 at once, then 10 a second, none refused (the quota's time: 3 s)."""
    key = "quota-pacing-key-0123"
    args = ("--rate-limit", "600/min", "--rate-burst", "10")
    with ServerProcess(api_keys=(key,), extra_args=args) as srv:
        items = [{"messages": MESSAGES, "id": str(i)} for i in range(40)]
        with Composo(api_key=key, base_url=srv.base_url) as client:
            started = time.monotonic()
            results = client.evaluate_many(items, CONCISE)
            elapsed = time.monotonic() - started
            limits = client.rate_limits()
            refused = client.throttled
    assert [r.error for r in results] == [None] * 40
    assert refused == 0
    assert limits is not None and limits.requests_per_minute == 600
    assert 2.5 <= elapsed < 30.0  # paced to the quota (3 s), never held a minute by a 429
