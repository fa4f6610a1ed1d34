"""The clients against the real local server: results, ordering, concurrency, tasks, environment."""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from typing import Any

import httpx
import pytest

from composo import (
    AsyncComposo,
    AuthenticationError,
    Composo,
    ComposoValidationError,
    EvaluationResponse,
    MalformedError,
    MultiAgentTraceResponse,
    NotFoundError,
    trace_from_messages,
)
from tests.support.servers import ServerProcess

QA = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]
TOOL_RUN: list[dict[str, Any]] = [
    {"role": "user", "content": "What's the weather in SF?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_123",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"location": "San Francisco"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_123", "content": '{"temp": 65, "condition": "sunny"}'},
    {"role": "assistant", "content": "It's 65°F and sunny in San Francisco!"},
]


class CountingTransport(httpx.HTTPTransport):
    """A real HTTP transport that remembers how many requests were in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            response = super().handle_request(request)
            response.read()
            return response
        finally:
            with self._lock:
                self.in_flight -= 1


def test_single_criterion_returns_one_response_and_sends_only_set_fields(
    client: Composo, live: ServerProcess
) -> None:
    result = client.evaluate(
        messages=QA,
        criteria="Reward accurate and informative responses",
        tags={"environment": "production", "version": "1.0.0"},
    )
    assert isinstance(result, EvaluationResponse)
    assert result.score is not None and 0.0 <= result.score <= 1.0
    assert result.explanation
    assert result.criterion == "Reward accurate and informative responses"
    (req,) = live.requests()
    assert req["path"] == "/api/v1/evals/reward"
    assert req["body"] == {
        "messages": QA,
        "evaluation_criteria": "Reward accurate and informative responses",
        "tags": {"environment": "production", "version": "1.0.0"},
    }


def test_several_criteria_come_back_in_order(client: Composo) -> None:
    criteria = [
        "Reward accurate information",
        "Passes if the answer names a city",
        "Penalize jargon",
    ]
    results = client.evaluate(messages=QA, criteria=criteria)
    assert [r.criterion for r in results] == criteria
    assert results[1].score in (0.0, 1.0)


def test_a_one_element_list_gives_one_result_as_the_platform_sdk_does(client: Composo) -> None:
    one = client.evaluate(messages=QA, criteria=["Reward accurate information"])
    assert isinstance(one, EvaluationResponse)
    assert one.criterion == "Reward accurate information" and one.score is not None
    named = client.evaluate(messages=QA, evaluator_name=["rag_faithfulness"])
    assert isinstance(named, EvaluationResponse)
    task = client.evaluate(messages=QA, criteria=["Reward accurate information"], block=False)
    assert isinstance(task, dict) and isinstance(task["task_id"], str)
    # The typed way to always get a list: evaluate_many, one result per pair.
    many = client.evaluate_many([{"messages": QA}], ["Reward accurate information"])
    assert [r.criterion for r in many] == ["Reward accurate information"]


def test_sync_criteria_run_concurrently_within_the_client_limit(live: ServerProcess) -> None:
    transport = CountingTransport()
    live.fault(*({"delay": 0.4} for _ in range(6)))
    with Composo(
        api_key=live.api_key,
        base_url=live.base_url,
        http_client=httpx.Client(transport=transport),
        max_concurrent_requests=3,
    ) as c:
        results = c.evaluate(messages=QA, criteria=[f"Reward answer number {i}" for i in range(6)])
    assert len(results) == 6
    assert transport.peak == 3  # parallel, and never above the limit


async def test_sync_client_works_inside_a_running_event_loop(live: ServerProcess) -> None:
    # As in Jupyter: a loop is running in this thread, and the sync call must still work.
    asyncio.get_running_loop()
    with Composo(api_key=live.api_key, base_url=live.base_url) as c:
        results = c.evaluate(messages=QA, criteria=["Reward accuracy", "Reward brevity"])
    assert len(results) == 2


async def test_async_client_bounds_concurrency_across_calls(live: ServerProcess) -> None:
    peak = 0
    in_flight = 0

    class Counting(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            nonlocal peak, in_flight
            in_flight += 1
            peak = max(peak, in_flight)
            try:
                response = await super().handle_async_request(request)
                await response.aread()
                return response
            finally:
                in_flight -= 1

    live.fault(*({"delay": 0.3} for _ in range(8)))
    async with AsyncComposo(
        api_key=live.api_key,
        base_url=live.base_url,
        max_concurrent_requests=2,
        http_client=httpx.AsyncClient(transport=Counting()),
    ) as c:
        batches = await asyncio.gather(
            *(c.evaluate(messages=QA, criteria=["Reward a", "Reward b"]) for _ in range(4))
        )
    assert [len(b) for b in batches] == [2, 2, 2, 2]
    assert peak == 2


async def test_async_evaluate_and_trace(aclient: AsyncComposo) -> None:
    result = await aclient.evaluate(messages=TOOL_RUN, criteria="Reward correct tool usage")
    assert isinstance(result, EvaluationResponse)
    trace = trace_from_messages(TOOL_RUN, name="weather_agent")
    verdict = await aclient.evaluate_trace(trace, criteria="Reward agents that use tools well")
    assert isinstance(verdict, MultiAgentTraceResponse)
    assert set(verdict.agent_scores) == {trace.root_agent_instance_id}


def test_trace_response_derives_reference_fields(client: Composo, live: ServerProcess) -> None:
    trace = trace_from_messages(
        TOOL_RUN,
        name="weather_agent",
        tools=[
            {
                "type": "function",
                "function": {"name": "get_weather", "description": "Weather", "parameters": {}},
            }
        ],
    )
    verdict = client.evaluate_trace(
        trace=trace, criteria="Reward agents that use tools well", tags={"agent_version": "1.0.0"}
    )
    assert verdict.criterion == "Reward agents that use tools well"
    assert "weather_agent" in verdict.results_by_agent_name
    scores = [s for s in verdict.agent_scores.values() if s is not None]
    assert verdict.overall_score == pytest.approx(sum(scores) / len(scores))
    assert "weather_agent" in verdict.explanation
    (req,) = live.requests()
    assert req["path"] == "/api/v1/evals/trace"
    assert req["body"]["trace"]["root_agent_instance_id"] == trace.root_agent_instance_id


def test_trace_as_a_dict_is_accepted(client: Composo) -> None:
    trace = trace_from_messages(QA, name="qa").model_dump(mode="json")
    verdict = client.evaluate_trace(trace, criteria=["Reward a", "Reward b"])
    assert len(verdict) == 2


def test_non_blocking_returns_task_ids_and_wait_gets_the_result(client: Composo) -> None:
    response = client.evaluate(messages=QA, criteria="Reward accurate answers", block=False)
    assert set(response) == {"task_id"}
    result = client.wait(response["task_id"], timeout=20)
    assert isinstance(result, EvaluationResponse)
    many = client.evaluate(messages=QA, criteria=["Reward a", "Reward b"], block=False)
    assert [set(m) for m in many] == [{"task_id"}, {"task_id"}]
    info = client.get_task(many[0]["task_id"])
    assert info.task_id == many[0]["task_id"]


async def test_async_non_blocking_trace_and_wait(aclient: AsyncComposo) -> None:
    trace = trace_from_messages(TOOL_RUN, name="agent")
    task = await aclient.evaluate_trace(trace, criteria="Reward good agents", block=False)
    verdict = await aclient.wait(task["task_id"], timeout=20)
    assert isinstance(verdict, MultiAgentTraceResponse)


def test_unknown_task_is_not_found(client: Composo) -> None:
    with pytest.raises(NotFoundError):
        client.get_task("no-such-task")


def test_environment_supplies_key_and_url(composo_env: ServerProcess) -> None:
    with Composo() as c:
        assert c.base_url == composo_env.base_url
        assert c.evaluate(messages=QA, criteria="Reward accuracy").score is not None


def test_missing_key_names_parameter_and_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COMPOSO_API_KEY", raising=False)
    with pytest.raises(ComposoValidationError, match=r"api_key.*COMPOSO_API_KEY"):
        Composo()
    with pytest.raises(ValueError, match="COMPOSO_API_KEY"):
        AsyncComposo()


def test_wrong_key_is_an_authentication_error_without_the_key(live: ServerProcess) -> None:
    secret = "sk-wrong-secret-value-42"
    with (
        Composo(api_key=secret, base_url=live.base_url) as c,
        pytest.raises(AuthenticationError) as info,
    ):
        c.evaluate(messages=QA, criteria="Reward accuracy")
    assert info.value.status_code == 401
    assert info.value.request_id  # the server's x-request-id, for support tickets
    assert info.value.request_id in str(info.value)
    assert secret not in str(info.value) and secret not in repr(info.value)
    assert len(live.requests()) == 1  # 401 is never retried


def test_key_never_in_repr_or_logs(live: ServerProcess, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    live.fault({"status": 503})
    with Composo(api_key=live.api_key, base_url=live.base_url) as c:
        assert live.api_key not in repr(c)
        c.evaluate(messages=QA, criteria="Reward accuracy")
    assert caplog.records, "the retry should have been logged"
    assert live.api_key not in caplog.text


def test_callers_objects_are_not_mutated(client: Composo) -> None:
    messages = copy.deepcopy(TOOL_RUN)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    tags = {"n": 1}
    before = copy.deepcopy((messages, tools, tags))
    client.evaluate(messages=messages, tools=tools, tags=tags, criteria=["Reward a", "Reward b"])
    assert (messages, tools, tags) == before


def test_result_is_appended_to_the_conversation(client: Composo, live: ServerProcess) -> None:
    client.evaluate(
        messages=QA[:1],
        result={"role": "assistant", "content": "Paris."},
        criteria="Reward accuracy",
    )
    client.evaluate(messages=QA[:1], result="Paris!", criteria="Reward accuracy")
    bodies = [r["body"]["messages"] for r in live.requests()]
    assert bodies[0][-1] == {"role": "assistant", "content": "Paris."}
    assert bodies[1][-1] == {"role": "assistant", "content": "Paris!"}


def test_client_model_core_is_sent_and_overridable(live: ServerProcess) -> None:
    with Composo(api_key=live.api_key, base_url=live.base_url, model_core="align-20250529") as c:
        c.evaluate(messages=QA, criteria="Reward accuracy")
        c.evaluate(
            messages=QA,
            criteria="Passes if the answer names Paris",
            model_core="align-lightning-20251127",
        )
    cores = [r["body"]["model_core"] for r in live.requests()]
    assert cores == ["align-20250529", "align-lightning-20251127"]


def test_optional_fields_reach_the_wire(client: Composo, live: ServerProcess) -> None:
    client.evaluate(
        messages=QA,
        criteria="Reward accuracy",
        system="You are a geography tutor.",
        evaluate_latest=True,
        explanation_cleaning="end_user",
        data_retention="none",
    )
    body = live.requests()[0]["body"]
    assert body["system"] == "You are a geography tutor."
    assert body["evaluate_latest"] is True
    assert body["explanation_cleaning"] == "end_user"
    assert body["data_retention"] == "none"


def test_evaluator_name_instead_of_criteria(client: Composo, live: ServerProcess) -> None:
    result = client.evaluate(messages=QA, evaluator_name="rag_relevance")
    assert result.criterion == "rag_relevance"
    body = live.requests()[0]["body"]
    assert body["evaluator_name"] == "rag_relevance"
    assert "evaluation_criteria" not in body
    with pytest.raises(MalformedError, match="not an evaluator this server knows"):
        client.evaluate(messages=QA, evaluator_name="no-such-evaluator")


def test_async_client_survives_a_new_event_loop(live: ServerProcess) -> None:
    # One client, two asyncio.run() calls (a script, or two notebook cells): the second loop
    # must not inherit the first loop's connections or request limit.
    c = AsyncComposo(api_key=live.api_key, base_url=live.base_url)

    async def score() -> list[EvaluationResponse]:
        out: list[EvaluationResponse] = await c.evaluate(
            messages=QA, criteria=["Reward accuracy", "Reward brevity"]
        )
        return out

    first = asyncio.run(score())
    second = asyncio.run(score())
    asyncio.run(c.aclose())
    assert [r.criterion for r in first] == [r.criterion for r in second]
    assert len([r for r in live.requests() if r["path"].endswith("/reward")]) == 4


@pytest.mark.parametrize("supplied", [False, True], ids=["own client", "http_client"])
def test_every_request_names_the_sdk_and_the_encodings_it_reads(
    live: ServerProcess, supplied: bool
) -> None:
    http = httpx.Client(headers={"X-Team": "search"}) if supplied else None
    before = dict(http.headers) if http is not None else None
    with Composo(api_key=live.api_key, base_url=live.base_url, http_client=http) as c:
        c.evaluate(messages=QA, criteria="Reward accuracy")
        c.evaluate(messages=QA, criteria="Reward accuracy", block=False)
    # Both were answered, so the API key went too (the server checks it; it never records it).
    for got in (r["headers"] for r in live.requests()):
        assert got["user-agent"].startswith("composo-python/")
        assert got["accept"] == "application/json"
        assert "gzip" in got["accept-encoding"]
        if supplied:
            assert got["x-team"] == "search"  # the supplied client's own defaults stay
    assert "idempotency-key" in live.requests()[-1]["headers"]
    if http is not None:
        assert dict(http.headers) == before  # the supplied client is left as it was
        http.close()


@pytest.mark.parametrize("supplied", [False, True], ids=["own client", "http_client"])
def test_each_request_is_logged_as_httpx_logs_it(
    live: ServerProcess, supplied: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Turning on INFO logging shows one line per request, whichever client sends it (the
    client's own connections send past ``httpx.Client.send``, which writes that line)."""
    http = httpx.Client() if supplied else None
    with (
        caplog.at_level("INFO", logger="httpx"),
        Composo(api_key=live.api_key, base_url=live.base_url, http_client=http) as c,
    ):
        c.evaluate(messages=QA, criteria=["Reward accuracy", "Reward brevity"])
    lines = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert (
        lines == [f'HTTP Request: POST {live.base_url}/api/v1/evals/reward "HTTP/1.1 200 OK"'] * 2
    )
    if http is not None:
        http.close()


async def test_async_requests_name_the_sdk_too(live: ServerProcess) -> None:
    async with AsyncComposo(api_key=live.api_key, base_url=live.base_url) as c:
        await c.evaluate(messages=QA, criteria="Reward accuracy")
    (got,) = (r["headers"] for r in live.requests())
    assert got["user-agent"].startswith("composo-python/")
    assert got["accept"] == "application/json"


def test_a_chat_becomes_a_trace_as_every_capture_converts_it() -> None:
    """trace_from_messages and the integrations share one conversion: arguments as JSON, a
    legacy function message as a tool response, built-in tools named by their type."""
    from composo.ext import to_trace_interaction

    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}
    chat = [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "name": "", "content": "done"},
        {"role": "function", "name": "g", "content": "legacy"},
        {"role": "assistant", "content": "Finished"},
    ]
    trace = trace_from_messages(chat, name="a", agent_id="a1", tools=[{"type": "web_search"}])
    first, second = trace.agent_instance_by_id["a1"].interactions
    assert not isinstance(first, str) and not isinstance(second, str)
    (out,) = first.output_messages
    assert out.type == "tool_call" and json.loads(out.content.parameters) == {"x": 1}
    responses = [m.content for m in second.input_messages if m.type == "tool_response"]
    assert [(r.response, r.name) for r in responses] == [("done", None), ("legacy", "g")]
    assert [t.name for t in first.tools_available or []] == ["web_search"]
    # the integrations' conversion reads the same call the same way
    same = to_trace_interaction(chat[:1], [chat[1]], None)
    assert same.output_messages == first.output_messages
