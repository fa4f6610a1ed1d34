"""The local server's account and history API over loopback HTTP: usage, the evaluation history
filter, traces, and the rate-limit headers on evaluation answers. Requests are checked against
the request models of the platform's reference (``composo._platform_types``), answers are
parsed with its response models."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from composo._platform_types import (
    EvaluationFilterRequest,
    EvaluationPage,
    TracePage,
    TraceRecord,
    Usage,
)
from tests.support.servers import HTTP, ServerProcess

KEY_A = "history-key-a-0123456789"
KEY_B = "history-key-b-0123456789"
CONCISE = "Reward responses that are concise"
POLITE = "Reward responses that are polite"
MESSAGES = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
]


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    db = tmp_path_factory.mktemp("history") / "tasks.sqlite3"
    with ServerProcess(
        api_keys=(KEY_A, KEY_B), db=db, extra_args=("--rate-limit", "600/min")
    ) as server:
        yield server


def post(srv: ServerProcess, path: str, body: Any, key: str = KEY_A) -> httpx.Response:
    return HTTP.post(srv.base_url + path, json=body, headers={"API-Key": key})


def get(srv: ServerProcess, path: str, key: str = KEY_A, **params: Any) -> httpx.Response:
    return HTTP.get(srv.base_url + path, params=params, headers={"API-Key": key})


def reward(
    srv: ServerProcess, criterion: str = CONCISE, key: str = KEY_A, **extra: Any
) -> httpx.Response:
    r = post(
        srv,
        "/api/v1/evals/reward",
        {"messages": MESSAGES, "evaluation_criteria": criterion, **extra},
        key,
    )
    assert r.status_code == 200, r.text
    return r


def history(srv: ServerProcess, key: str = KEY_A, **query: Any) -> EvaluationPage:
    # The body is what a client sends: only the fields that are set, valid for the reference.
    body = EvaluationFilterRequest(**query).model_dump(exclude_none=True)
    r = post(srv, "/api/v1/evaluations/filter", body, key)
    assert r.status_code == 200, r.text
    return EvaluationPage.model_validate(r.json())


def trace_body(trace_id: str, criterion: str = CONCISE, **extra: Any) -> dict[str, Any]:
    interaction = {
        "input_messages": [{"role": "user", "content": "Find the weather in Paris"}],
        "output_messages": [{"content": "It is sunny in Paris today."}],
    }
    return {
        "trace": {
            "root_agent_instance_id": "root",
            "agent_instance_by_id": {
                "root": {"id": "root", "name": "planner", "interactions": [interaction, "w1"]},
                "w1": {"id": "w1", "name": "weather", "interactions": [interaction]},
            },
        },
        "evaluation_criteria": criterion,
        "trace_id": trace_id,
        **extra,
    }


def test_tagged_evaluations_come_back_exactly_with_their_criterion(srv: ServerProcess) -> None:
    run = uuid.uuid4().hex[:12]
    reward(srv, CONCISE, tags={"run": run, "step": "1"})
    reward(srv, POLITE, tags={"run": run, "step": "2"})
    reward(srv, CONCISE, tags={"run": run})
    reward(srv, CONCISE, tags={"run": run + "-other"})

    page = history(srv, filters=[{"key": "run", "values": [run]}])
    assert page.total == 3 and page.total_pages == 1
    assert sorted(e.criterion or "" for e in page.evaluations) == [CONCISE, CONCISE, POLITE]
    for e in page.evaluations:
        assert e.tags["run"] == run
        assert e.status_code == 200
        assert e.endpoint == "/api/v1/evals/reward"
        assert e.model_class == "align-20251111"
        assert e.latency_ms is not None and e.latency_ms >= 0
        assert e.request_payload is not None and e.request_payload["messages"] == MESSAGES
        assert e.score is not None and 0.0 <= e.score <= 1.0
    # newest first
    assert [e.created_at for e in page.evaluations] == sorted(
        (e.created_at for e in page.evaluations), reverse=True
    )

    both = history(
        srv,
        filters=[{"key": "run", "values": [run]}, {"key": "step", "values": ["1", "2"]}],
        criteria_filter={"values": [POLITE]},
    )
    assert [(e.tags["step"], e.criterion) for e in both.evaluations] == [("2", POLITE)]


def test_pages_split_the_history_without_overlap(srv: ServerProcess) -> None:
    run = uuid.uuid4().hex[:12]
    for _ in range(5):
        reward(srv, tags={"run": run})
    tagged = [{"key": "run", "values": [run]}]
    first = history(srv, filters=tagged, page_size=2)
    second = history(srv, filters=tagged, page_size=2, page=2)
    third = history(srv, filters=tagged, page_size=2, page=3)
    assert (first.total, first.total_pages, first.page, first.page_size) == (5, 3, 1, 2)
    ids = [e.id for p in (first, second, third) for e in p.evaluations]
    assert len(ids) == 5 == len(set(ids))
    assert history(srv, filters=tagged, page_size=2, page=4).evaluations == []


def test_endpoint_type_separates_reward_from_trace(srv: ServerProcess) -> None:
    run = uuid.uuid4().hex[:12]
    reward(srv, tags={"run": run})
    r = post(srv, "/api/v1/evals/trace", trace_body(str(uuid.uuid4()), tags={"run": run}))
    assert r.status_code == 200, r.text
    tagged = [{"key": "run", "values": [run]}]
    traces = history(srv, filters=tagged, endpoint_type="trace").evaluations
    rewards = history(srv, filters=tagged, endpoint_type="reward").evaluations
    assert [e.endpoint for e in traces] == ["/api/v1/evals/trace"]
    assert [e.endpoint for e in rewards] == ["/api/v1/evals/reward"]
    assert traces[0].score is not None  # the mean of the agents' scores


def test_each_key_sees_only_its_own_history_and_usage(srv: ServerProcess) -> None:
    run = uuid.uuid4().hex[:12]
    before = Usage.model_validate(get(srv, "/api/v1/usage", KEY_B).json())
    reward(srv, tags={"run": run}, key=KEY_A)
    tagged = [{"key": "run", "values": [run]}]
    assert history(srv, KEY_A, filters=tagged).total == 1
    assert history(srv, KEY_B, filters=tagged).total == 0
    after = Usage.model_validate(get(srv, "/api/v1/usage", KEY_B).json())
    assert after.usage.total_current_request_count == before.usage.total_current_request_count


def test_usage_counts_what_was_served_per_model_core(srv: ServerProcess) -> None:
    before = Usage.model_validate(get(srv, "/api/v1/usage").json())
    reward(srv)
    reward(srv, "Passes if the answer names a city", model_core="align-lightning-20251127")
    now = Usage.model_validate(get(srv, "/api/v1/usage").json())
    counts = now.usage.total_current_request_count - before.usage.total_current_request_count
    assert counts == 2
    assert now.usage.models["align-lightning-20251127"]["request_count"] >= 1
    today = time.gmtime()
    year, month = (
        (today.tm_year + 1, 1) if today.tm_mon == 12 else (today.tm_year, today.tm_mon + 1)
    )
    assert now.quota_reset_date == f"{year:04d}-{month:02d}-01"


def test_refused_requests_are_neither_counted_nor_kept(srv: ServerProcess) -> None:
    before = Usage.model_validate(get(srv, "/api/v1/usage").json())
    r = post(srv, "/api/v1/evals/reward", {"messages": MESSAGES, "evaluation_criteria": "Nice"})
    assert r.status_code == 422
    after = Usage.model_validate(get(srv, "/api/v1/usage").json())
    assert after.usage.total_current_request_count == before.usage.total_current_request_count


def test_no_retention_keeps_the_row_without_its_content(srv: ServerProcess) -> None:
    run = uuid.uuid4().hex[:12]
    reward(srv, tags={"run": run}, data_retention="none")
    (e,) = history(srv, filters=[{"key": "run", "values": [run]}]).evaluations
    assert e.request_payload is None and e.response_payload is None
    assert e.tags == {"run": run} and e.status_code == 200


def test_background_evaluations_are_kept_under_the_submitting_key(srv: ServerProcess) -> None:
    run = uuid.uuid4().hex[:12]
    r = post(
        srv,
        "/api/v1/evals/reward/background",
        {"messages": MESSAGES, "evaluation_criteria": CONCISE, "tags": {"run": run}},
    )
    task = r.json()["task_id"]
    deadline = time.monotonic() + 10
    while get(srv, f"/api/v1/evals/tasks/{task}").json()["status"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    (e,) = history(srv, filters=[{"key": "run", "values": [run]}]).evaluations
    assert e.endpoint == "/api/v1/evals/reward/background" and e.criterion == CONCISE
    assert history(srv, KEY_B, filters=[{"key": "run", "values": [run]}]).total == 0


def test_hostile_tag_keys_and_values_filter_literally(srv: ServerProcess) -> None:
    key = "k'\" OR 1=1 --$.[*]"
    value = "v'); DROP TABLE history_evaluations; --" + uuid.uuid4().hex[:8]
    reward(srv, tags={key: value})
    (e,) = history(srv, filters=[{"key": key, "values": [value]}]).evaluations
    assert e.tags == {key: value}
    assert history(srv, filters=[{"key": key, "values": ["%"]}]).total == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"page": 0}, "page"),
        ({"page_size": 0}, "page_size"),
        ({"page_size": 5000}, "page_size"),
        ({"endpoint_type": "chat"}, "endpoint_type"),
        ({"filters": [{"key": "run"}]}, "values"),
        ({"criteria_filter": {"values": []}}, "values"),
        ({"tags": {"run": "x"}}, "tags"),
    ],
)
def test_a_bad_filter_is_refused_naming_the_field(
    srv: ServerProcess, body: dict[str, Any], field: str
) -> None:
    r = post(srv, "/api/v1/evaluations/filter", body)
    assert r.status_code == 422
    assert field in r.json()["detail"]


def test_evaluation_answers_carry_the_rate_limit(srv: ServerProcess) -> None:
    started = time.monotonic()
    answers = [reward(srv, key=KEY_B) for _ in range(5)]
    refilled = math.ceil((time.monotonic() - started) * 10)  # 600/min: one every 0.1 s
    assert answers[0].headers["x-ratelimit-limit"] == "600"
    first, last = (int(r.headers["x-ratelimit-remaining"]) for r in (answers[0], answers[-1]))
    # each answer counted; what came back meanwhile (a loaded machine is slow) made up for it
    assert 0 <= last <= first - 4 + refilled and first <= 600
    assert 0 <= int(answers[-1].headers["x-ratelimit-reset"]) <= 1


def test_a_trace_keeps_its_content_and_each_agents_evaluation(srv: ServerProcess) -> None:
    trace_id = str(uuid.uuid4())
    assert post(srv, "/api/v1/evals/trace", trace_body(trace_id, tags={"a": "1"})).is_success
    assert post(
        srv, "/api/v1/evals/trace", trace_body(trace_id, POLITE, tags={"b": "2"})
    ).is_success
    got = TraceRecord.model_validate(get(srv, f"/api/v1/traces/{trace_id}").json())
    assert got.id == trace_id and got.tags == {"a": "1", "b": "2"}
    assert set(got.trace["agent_instance_by_id"]) == {"root", "w1"}
    assert sorted((e.criteria, (e.sub_trace or {}).get("name")) for e in got.evaluations) == [
        (CONCISE, "planner"),
        (CONCISE, "weather"),
        (POLITE, "planner"),
        (POLITE, "weather"),
    ]
    assert all(e.score is not None and e.explanation for e in got.evaluations)
    assert got.rating is None and got.comments == []
    # another key cannot read it
    assert get(srv, f"/api/v1/traces/{trace_id}", KEY_B).status_code == 404


def test_a_reward_request_naming_a_trace_adds_to_it(srv: ServerProcess) -> None:
    trace_id = str(uuid.uuid4())
    reward(srv, trace_id=trace_id)
    got = TraceRecord.model_validate(get(srv, f"/api/v1/traces/{trace_id}").json())
    assert [(e.criteria, e.sub_trace) for e in got.evaluations] == [(CONCISE, None)]


def test_traces_page_by_token_newest_first(srv: ServerProcess) -> None:
    start = time.time()
    made = [str(uuid.uuid4()) for _ in range(5)]
    for trace_id in made:
        assert post(srv, "/api/v1/evals/trace", trace_body(trace_id)).is_success
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(start - 1)) + "Z"
    seen: list[str] = []
    token: str | None = None
    while True:
        params: dict[str, Any] = {"page_size": 2, "start_date": since}
        if token:
            params["page_token"] = token
        r = get(srv, "/api/v1/traces", **params)
        assert r.status_code == 200, r.text
        page = TracePage.model_validate(r.json())
        assert len(page.traces) <= 2
        seen += [t.id for t in page.traces]
        token = page.next_page_token
        if token is None:
            break
    assert seen[: len(made)] == made[::-1] or set(made) <= set(seen)
    assert len(seen) == len(set(seen))
    later = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 3600))
    assert get(srv, "/api/v1/traces", start_date=later).json()["traces"] == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"page_size": 0}, "page_size"),
        ({"page_size": 501}, "page_size"),
        ({"page_size": "ten"}, "page_size"),
        ({"page_token": "not-a-token"}, "page_token"),
        ({"start_date": "yesterday"}, "start_date"),
        ({"cursor": "x"}, "cursor"),
    ],
)
def test_bad_trace_listing_parameters_are_refused(
    srv: ServerProcess, params: dict[str, Any], field: str
) -> None:
    r = get(srv, "/api/v1/traces", **params)
    assert r.status_code == 422
    assert r.json()["detail"].startswith(field)


def test_an_unknown_or_malformed_trace_id(srv: ServerProcess) -> None:
    assert get(srv, f"/api/v1/traces/{uuid.uuid4()}").status_code == 404
    r = get(srv, "/api/v1/traces/<script>alert(1)</script>")
    assert r.status_code in (404, 422)


def test_the_routes_need_the_key(srv: ServerProcess) -> None:
    assert HTTP.get(srv.base_url + "/api/v1/usage").status_code == 401
    assert get(srv, "/api/v1/usage", key="wrong-key").status_code == 401


@pytest.mark.slow
def test_history_survives_a_kill_and_restart(tmp_path: Path) -> None:
    db = tmp_path / "tasks.sqlite3"
    run = uuid.uuid4().hex[:12]
    with ServerProcess(api_keys=(KEY_A,), db=db) as first:
        reward(first, tags={"run": run})
        assert history(first, filters=[{"key": "run", "values": [run]}]).total == 1
        first.stop(kill=True)
    with ServerProcess(api_keys=(KEY_A,), db=db) as second:
        (e,) = history(second, filters=[{"key": "run", "values": [run]}]).evaluations
        assert e.criterion == CONCISE
        assert Usage.model_validate(get(second, "/api/v1/usage").json()).usage.models


def test_history_days_zero_keeps_no_history_but_counts_usage(tmp_path: Path) -> None:
    with ServerProcess(
        api_keys=(KEY_A,), db=tmp_path / "t.sqlite3", extra_args=("--history-days", "0")
    ) as srv:
        reward(srv, tags={"run": "x"})
        assert history(srv).total == 0
        usage = Usage.model_validate(get(srv, "/api/v1/usage").json())
        assert usage.usage.total_current_request_count == 1


def test_a_spent_quota_says_when_the_next_request_may_go() -> None:
    with ServerProcess(api_keys=(KEY_A,), extra_args=("--rate-limit", "2/min")) as srv:
        answers = [
            post(
                srv, "/api/v1/evals/reward", {"messages": MESSAGES, "evaluation_criteria": CONCISE}
            )
            for _ in range(3)
        ]
    assert [r.status_code for r in answers] == [200, 200, 429]
    assert [r.headers["x-ratelimit-remaining"] for r in answers] == ["1", "0", "0"]
    refused = answers[2]
    assert refused.headers["x-ratelimit-limit"] == "2"
    # The same wait as Retry-After (one request every 30 s), never the whole minute.
    assert abs(int(refused.headers["x-ratelimit-reset"]) - int(refused.headers["retry-after"])) <= 1
    assert 25 <= int(refused.headers["retry-after"]) <= 30


def test_the_history_keeps_at_most_its_rows_newest_first(tmp_path: Path) -> None:
    with ServerProcess(
        api_keys=(KEY_A,), db=tmp_path / "t.sqlite3", extra_args=("--history-max-rows", "3")
    ) as srv:
        for n in range(5):
            reward(srv, tags={"n": str(n)})
        page = history(srv)
        assert [e.tags["n"] for e in page.evaluations] == ["4", "3", "2"]
        # usage is kept apart from the history: every evaluation still counts
        usage = Usage.model_validate(get(srv, "/api/v1/usage").json())
        assert usage.usage.total_current_request_count == 5


@pytest.mark.slow
def test_the_history_forgets_what_is_older_than_its_retention(tmp_path: Path) -> None:
    days = 3.0 / 86400  # three seconds
    with ServerProcess(
        api_keys=(KEY_A,), db=tmp_path / "t.sqlite3", extra_args=("--history-days", str(days))
    ) as srv:
        reward(srv, tags={"n": "old"})
        assert history(srv).total == 1
        time.sleep(3.5)
        reward(srv, tags={"n": "new"})
        assert [e.tags["n"] for e in history(srv).evaluations] == ["new"]
