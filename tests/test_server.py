"""The local server over real loopback HTTP: endpoints, auth, validation, tasks, the dev switch."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from composo import (
    APIConnectionError,
    AsyncComposo,
    AuthenticationError,
    Composo,
    EvaluationResponse,
    MultiAgentTraceResponse,
    NotFoundError,
)
from composo._core.trace import AgentInstance, LLMInteraction, MultiAgentTrace, trace_from_messages
from tests.support.servers import HTTP, ServerProcess

QA = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris, on the Seine."},
]
REWARD = "Reward responses that name the capital city asked about"
WEATHER = [
    {"role": "user", "content": "What's the weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "18C and sunny"},
    {"role": "assistant", "content": "It is 18C and sunny in Paris."},
]


def post(live: ServerProcess, path: str, body: object, key: str | None = None) -> httpx.Response:
    headers = {"API-Key": key if key is not None else live.api_key}
    return HTTP.post(live.base_url + path, json=body, headers=headers, timeout=10)


def two_agent_trace() -> MultiAgentTrace:
    planner = trace_from_messages(QA, name="planner", agent_id="p1")
    worker = trace_from_messages(WEATHER, name="worker", agent_id="w1")
    idle = AgentInstance(id="idle", name="router", interactions=["w1"])
    root = planner.agent_instance_by_id["p1"]
    agents = {
        "p1": AgentInstance(id="p1", name="planner", interactions=[*root.interactions, "idle"]),
        "idle": idle,
        "w1": worker.agent_instance_by_id["w1"],
    }
    return MultiAgentTrace(root_agent_instance_id="p1", agent_instance_by_id=agents)


def test_healthcheck_needs_no_key(live: ServerProcess) -> None:
    r = HTTP.get(live.base_url + "/api/healthcheck")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"


def test_reward_scores_and_explains(client: Composo) -> None:
    res = client.evaluate(messages=QA, criteria=REWARD)
    assert isinstance(res, EvaluationResponse)
    assert res.score is not None and 0.0 <= res.score <= 1.0
    assert "looked for" in res.explanation  # what the stand-in looked for, and found
    assert res.criterion == REWARD


def test_several_criteria_come_back_in_order(client: Composo) -> None:
    crits = [REWARD, "Passes if the response names a city", "Reward tool calls with good arguments"]
    out = client.evaluate(messages=QA, criteria=crits)
    assert [r.criterion for r in out] == crits
    assert out[1].score in (0.0, 1.0)
    assert out[2].score is None  # about tool use, and no tool was called


async def test_async_client_reward_and_trace(aclient: AsyncComposo) -> None:
    res = await aclient.evaluate(
        messages=WEATHER, criteria="Reward tool calls with grounded arguments"
    )
    assert res.score is not None
    assert "get_weather" in res.explanation
    tr = await aclient.evaluate_trace(two_agent_trace(), criteria=REWARD)
    assert isinstance(tr, MultiAgentTraceResponse)
    assert set(tr.results_by_agent_name) == {"planner", "worker", "router"}


def test_trace_judges_each_agent_instance(client: Composo) -> None:
    res = client.evaluate_trace(two_agent_trace(), criteria="Reward agents that use tools well")
    by_name = res.results_by_agent_name
    # The planner called no tool and the router made no model call: neither applies.
    assert by_name["planner"].results_by_agent_instance_id["p1"] is not None
    assert by_name["planner"].results_by_agent_instance_id["p1"].score is None
    assert by_name["router"].results_by_agent_instance_id == {"idle": None}
    worker = by_name["worker"]
    score = worker.results_by_agent_instance_id["w1"].score
    assert score is not None
    assert worker.summary_statistics is not None
    assert worker.summary_statistics.median == score
    assert res.overall_score == score
    assert res.agent_scores == {"p1": None, "idle": None, "w1": score}


def test_background_reward_and_trace_via_tasks(client: Composo) -> None:
    submitted = client.evaluate(messages=QA, criteria=REWARD, block=False)
    assert set(submitted) == {"task_id"}
    done = client.wait(submitted["task_id"], timeout=10, poll_interval=0.05)
    assert isinstance(done, EvaluationResponse)
    assert done.score == client.evaluate(messages=QA, criteria=REWARD).score
    info = client.get_task(submitted["task_id"])
    assert info.status == "succeeded" and info.result is not None

    t = client.evaluate_trace(two_agent_trace(), criteria=REWARD, block=False)
    traced = client.wait(t["task_id"], timeout=10, poll_interval=0.05)
    assert isinstance(traced, MultiAgentTraceResponse)
    assert "worker" in traced.results_by_agent_name


def test_unknown_task_is_404(client: Composo) -> None:
    with pytest.raises(NotFoundError, match="no task"):
        client.get_task("does-not-exist")


def test_wrong_or_missing_key_is_401(live: ServerProcess) -> None:
    with Composo(api_key="wrong", base_url=live.base_url) as c, pytest.raises(AuthenticationError):
        c.evaluate(messages=QA, criteria=REWARD)
    r = HTTP.post(live.base_url + "/api/v1/evals/reward", json={})
    assert r.status_code == 401
    assert "API-Key" in r.json()["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": QA, "evaluation_criteria": REWARD, "colour": "red"}, "colour"),
        ({"messages": QA[:1], "evaluation_criteria": REWARD}, "messages"),
        ({"messages": QA, "evaluation_criteria": "Be nice"}, "evaluation_criteria"),
        ({"messages": QA, "evaluation_criteria": REWARD, "model_core": "gpt"}, "model_core"),
        ({"messages": QA, "evaluator_name": "no-such-evaluator"}, "evaluator_name"),
    ],
)
def test_invalid_bodies_get_422_naming_the_field(
    live: ServerProcess, body: dict[str, object], field: str
) -> None:
    for path in ("/api/v1/evals/reward", "/api/v1/evals/reward/background"):
        r = post(live, path, body)
        assert r.status_code == 422, r.text
        assert field in r.json()["detail"]


def test_trace_rules_are_enforced(live: ServerProcess) -> None:
    trace = two_agent_trace().model_dump()
    r = post(
        live,
        "/api/v1/evals/trace",
        {"trace": trace, "evaluation_criteria": REWARD, "evaluate_latest": True},
    )
    assert r.status_code == 422 and "evaluate_latest" in r.json()["detail"]
    empty = {"root_agent_instance_id": "a", "agent_instance_by_id": {"a": {"id": "a", "name": "x"}}}
    r = post(
        live, "/api/v1/evals/trace/background", {"trace": empty, "evaluation_criteria": REWARD}
    )
    assert r.status_code == 422 and "LLM interaction" in r.json()["detail"]


def test_evaluator_name_may_name_a_ready_made_criterion(live: ServerProcess) -> None:
    r = post(live, "/api/v1/evals/reward", {"messages": QA, "evaluator_name": "rag_relevance"})
    assert r.status_code == 200
    assert r.json()["score"] is not None


def test_lightning_core_refuses_a_named_evaluator_that_is_not_binary(live: ServerProcess) -> None:
    lightning = {"messages": QA, "model_core": "align-lightning-20251127"}
    for path in ("/api/v1/evals/reward", "/api/v1/evals/reward/background"):
        r = post(live, path, {**lightning, "evaluator_name": "rag_relevance"})
        assert r.status_code == 422, r.text
        assert "binary" in r.json()["detail"] and "rag_relevance" in r.json()["detail"]
    r = post(live, "/api/v1/evals/reward", {**lightning, "evaluator_name": "binary_cites_sources"})
    assert r.status_code == 200 and r.json()["score"] in (0.0, 1.0)


def test_cleaned_explanation_when_asked(client: Composo) -> None:
    res = client.evaluate(messages=QA, criteria=REWARD, explanation_cleaning="end_user")
    assert res.cleaned_explanation
    assert "stand-in" not in res.cleaned_explanation


def test_dev_switch_records_requests_without_the_key(live: ServerProcess, client: Composo) -> None:
    client.evaluate(messages=QA, criteria=REWARD, tags={"run": "7"})
    (seen,) = live.requests()
    assert seen["method"] == "POST" and seen["path"] == "/api/v1/evals/reward"
    assert seen["body"]["tags"] == {"run": "7"}
    assert all(h.lower() != "api-key" for h in seen["headers"])
    assert live.api_key not in str(seen)
    live.reset()
    assert live.requests() == []


def test_faults_are_consumed_in_order(live: ServerProcess) -> None:
    live.fault({"status": 429, "retry_after": "3", "detail": "slow down"}, {"status": 500})
    r = post(live, "/api/v1/evals/reward", {"messages": QA, "evaluation_criteria": REWARD})
    assert (r.status_code, r.headers["retry-after"], r.json()) == (
        429,
        "3",
        {"detail": "slow down"},
    )
    assert post(live, "/api/v1/evals/reward", {}).status_code == 500
    assert post(live, "/api/v1/evals/reward", {}).status_code == 422


def test_fault_path_filter(live: ServerProcess) -> None:
    live.fault({"status": 503, "path": "/trace"})
    assert (
        post(
            live, "/api/v1/evals/reward", {"messages": QA, "evaluation_criteria": REWARD}
        ).status_code
        == 200
    )
    assert post(live, "/api/v1/evals/trace", {}).status_code == 503


def test_a_reset_ends_the_delays_still_running(live: ServerProcess) -> None:
    """A delayed request a test left behind is answered at the reset, not minutes later (nor
    does it hold up the server's shutdown)."""
    live.fault({"delay": 120, "status": 503})
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(post, live, "/api/v1/evals/reward", {})
        while not live.requests():  # it has arrived and is being held
            time.sleep(0.01)
        assert not waiting.done()
        live.reset()
        assert waiting.result(timeout=10).status_code == 503


def test_dropped_connection_is_retried_by_the_client(live: ServerProcess, client: Composo) -> None:
    live.fault({"drop": True})
    with pytest.raises(httpx.TransportError):
        post(live, "/api/v1/evals/reward", {"messages": QA, "evaluation_criteria": REWARD})
    live.fault({"drop": True})
    assert client.evaluate(messages=QA, criteria=REWARD).score is not None
    assert len(live.requests()) == 3


def test_dropped_twice_exhausts_retries(live: ServerProcess, client: Composo) -> None:
    live.fault({"drop": True}, {"drop": True})
    with pytest.raises(APIConnectionError):
        client.evaluate(messages=QA, criteria=REWARD)


def test_dev_routes_are_404_without_the_switch(tmp_path: Path) -> None:
    with ServerProcess(dev_faults=False, db=tmp_path / "t.db") as srv:
        assert HTTP.get(srv.base_url + "/_dev/requests").status_code == 404
        assert HTTP.post(srv.base_url + "/_dev/faults", json={"faults": []}).status_code == 404


def test_trace_interactions_render_like_a_conversation(client: Composo) -> None:
    interaction = LLMInteraction.model_validate(
        {
            "input_messages": [{"role": "user", "content": "What is the capital of France?"}],
            "output_messages": [{"content": "Paris is the capital of France."}],
        }
    )
    trace = MultiAgentTrace(
        root_agent_instance_id="a",
        agent_instance_by_id={"a": AgentInstance(id="a", name="solo", interactions=[interaction])},
    )
    res = client.evaluate_trace(trace, criteria=REWARD)
    assert res.overall_score is not None and res.overall_score > 0.5


def test_a_generated_local_key_can_follow_api_key_on_a_command_line() -> None:
    """A random key that began with "-" would be read as an option after `--api-key`."""
    import argparse

    from composo.server import LocalServer

    parser = argparse.ArgumentParser()
    parser.add_argument("--api-key")
    for _ in range(200):
        key = LocalServer().api_key
        assert parser.parse_args(["--api-key", key]).api_key == key
