"""Bodies the platform accepts never break a judge; refusals are one line naming the field once;
large traces are bounded."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from composo import Composo
from composo.server import LocalServer
from composo.server._bodies import MAX_TRACE_AGENTS
from composo.server._config import JudgeOptions
from tests.support.openai_standin import OpenAIStandIn, chat_completion
from tests.support.servers import HTTP, ServerProcess

REWARD = "Reward responses that name the capital city"
QUESTION = {"role": "user", "content": "What is the capital of France?"}

ODD_ASSISTANTS: list[dict[str, Any]] = [
    {"role": "assistant", "content": "Paris.", "tool_calls": 5},
    {"role": "assistant", "content": None, "tool_calls": [{"function": "f"}]},
    {"role": "assistant", "content": None, "tool_calls": [{"function": [1]}]},
    {"role": "assistant", "content": "Paris.", "tool_calls": "get_capital"},
    {"role": "assistant", "content": "x", "tool_calls": [None, 3, {"function": {"name": 7}}]},
    {
        "role": "assistant",
        "content": "x",
        "tool_calls": {"function": {"name": "f", "arguments": {}}},
    },
    {"role": "assistant", "content": 42},
    {"role": "assistant", "content": [1, None, {"type": 5}, {"type": "text", "text": [2]}]},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "name": ["n"], "input": "not an object"}],
    },
    {"role": "assistant", "content": {"type": "tool_result", "content": {"deep": [[[]]]}}},
    {"role": "assistant", "name": 3, "tool_call_id": {}, "content": "Paris."},
]
ODD_TOOLS: list[Any] = [
    [{"type": "function", "function": "f"}],
    [{"type": "function", "function": {"name": 1, "description": ["d"]}}],
    [{"name": None, "input_schema": 5}],
]


def post(srv: ServerProcess, path: str, body: Any, key: str | None = None) -> httpx.Response:
    return HTTP.post(
        srv.base_url + path, json=body, headers={"API-Key": key or srv.api_key}, timeout=30
    )


@pytest.mark.parametrize("assistant", ODD_ASSISTANTS, ids=lambda a: json.dumps(a)[:48])
def test_odd_message_shapes_are_judged(live: ServerProcess, assistant: dict[str, Any]) -> None:
    for criterion in (REWARD, "Reward tool calls with grounded arguments", "Fails if it refuses"):
        body = {"messages": [QUESTION, assistant], "evaluation_criteria": criterion}
        r = post(live, "/api/v1/evals/reward", body)
        assert r.status_code == 200, r.text
        submitted = post(live, "/api/v1/evals/reward/background", body)
        assert submitted.status_code == 200, submitted.text
        with Composo(api_key=live.api_key, base_url=live.base_url) as c:
            done = c.wait(submitted.json()["task_id"], timeout=60, poll_interval=0.02)
        assert done.score == r.json()["score"]


def test_a_role_that_is_not_a_string_is_never_a_server_error(live: ServerProcess) -> None:
    body = {"messages": [QUESTION, {"role": ["assistant"], "content": "Paris."}]}
    for path in ("/api/v1/evals/reward", "/api/v1/evals/reward/background"):
        r = post(live, path, {**body, "evaluation_criteria": REWARD})
        assert r.status_code in (200, 422), r.text
        if r.status_code == 422:
            assert "messages" in r.json()["detail"]


@pytest.mark.parametrize("tools", ODD_TOOLS, ids=lambda t: json.dumps(t)[:40])
def test_odd_tool_definitions_are_judged(live: ServerProcess, tools: Any) -> None:
    answer = {"role": "assistant", "content": None, "tool_calls": [{"function": "f"}]}
    body = {
        "messages": [QUESTION, answer],
        "tools": tools,
        "evaluation_criteria": "Reward tool calls that use an offered tool",
    }
    assert post(live, "/api/v1/evals/reward", body).status_code == 200


def test_odd_tool_calls_reach_the_judge_as_text(openai_standin: OpenAIStandIn) -> None:
    answer = json.dumps({"applicable": True, "score": 1.0, "explanation": "ok"})
    openai_standin.on_chat(lambda body: chat_completion(content=answer))
    options = JudgeOptions(model="m", api_key="sk-test", base_url=openai_standin.base_url)
    messages = [
        QUESTION,
        {"role": "assistant", "content": "Paris.", "tool_calls": [5, {"function": "lookup"}]},
    ]
    with (
        LocalServer(judge="openai", judge_options=options) as srv,
        Composo(api_key=srv.api_key, base_url=srv.base_url) as c,
    ):
        assert c.evaluate(messages=messages, criteria=REWARD).score == 1.0
    (request,) = [r["body"] for r in openai_standin.requests]
    shown = request["messages"][1]["content"]
    assert "[tool call: 5]" in shown  # unreadable: shown as it came
    assert "tool call lookup()" in shown  # readable: a call named lookup


# -- refusals ------------------------------------------------------------------------------------


def detail(srv: ServerProcess, path: str, body: Any) -> str:
    r = post(srv, path, body)
    assert r.status_code == 422, r.text
    text: str = r.json()["detail"]
    assert "\n" not in text
    return text


def test_a_refused_criterion_names_the_field_once(live: ServerProcess) -> None:
    body = {"messages": [QUESTION, QUESTION], "evaluation_criteria": "Be nice"}
    text = detail(live, "/api/v1/evals/reward", body)
    assert text.count("evaluation_criteria") == 1
    assert text.startswith("evaluation_criteria: 'Be nice' must begin with 'Reward'")


def _trace(interactions: list[Any]) -> dict[str, Any]:
    return {
        "trace": {
            "root_agent_instance_id": "a",
            "agent_instance_by_id": {"a": {"id": "a", "name": "x", "interactions": interactions}},
        },
        "evaluation_criteria": REWARD,
    }


@pytest.mark.parametrize("path", ["/api/v1/evals/trace", "/api/v1/evals/trace/background"])
def test_trace_refusals_name_real_fields_not_union_branches(live: ServerProcess, path: str) -> None:
    text = detail(live, path, _trace([5]))
    assert text == ("trace.agent_instance_by_id.a.interactions.0: expected a string or an object")
    broken = {"input_messages": [{"content": "hi"}], "output_messages": [{"content": {"id": "1"}}]}
    text = detail(live, path, _trace([broken]))
    assert "trace.agent_instance_by_id.a.interactions.0.input_messages.0.role: required" in text
    assert "output_messages.0.content.name: required" in text
    for branch in (".str", "LLMInteraction", "ToolCall", "ToolResponse"):
        assert branch not in text


def test_model_core_refusal_says_what_is_expected(live: ServerProcess) -> None:
    body = {"messages": [QUESTION, QUESTION], "evaluation_criteria": REWARD, "model_core": "x"}
    text = detail(live, "/api/v1/evals/reward", body)
    # The field is named once, then what was sent and what would be accepted.
    assert text.startswith("model_core: 'x' is not a model core; use one of align-20251111")
    assert text.count("model_core") == 1
    assert "\n" not in text


def test_a_body_that_is_not_json_is_one_line(live: ServerProcess) -> None:
    r = HTTP.post(
        live.base_url + "/api/v1/evals/reward",
        content=b'{"messages": [',
        headers={"API-Key": live.api_key, "Content-Type": "application/json"},
    )
    assert r.status_code == 422 and r.json()["detail"].startswith("the body is not valid JSON")


# -- large traces --------------------------------------------------------------------------------


def big_trace(agents: int, text_words: int) -> dict[str, Any]:
    words = " ".join(f"word{i % 997}" for i in range(text_words))
    by_id: dict[str, Any] = {}
    for i in range(agents):
        by_id[f"a{i}"] = {
            "id": f"a{i}",
            "name": f"agent-{i % 40}",
            "interactions": [
                {
                    "input_messages": [{"role": "user", "content": f"Question {i}: {words}"}],
                    "output_messages": [{"content": f"Answer {i}: {words}"}],
                }
            ],
        }
    by_id["a0"]["interactions"] += [f"a{i}" for i in range(1, agents)]
    return {
        "trace": {"root_agent_instance_id": "a0", "agent_instance_by_id": by_id},
        "evaluation_criteria": "Reward agents that answer the question",
    }


def test_a_trace_over_the_agent_limit_is_413_naming_the_limit(live: ServerProcess) -> None:
    body = big_trace(MAX_TRACE_AGENTS + 1, 1)
    for path in ("/api/v1/evals/trace", "/api/v1/evals/trace/background"):
        r = post(live, path, body)
        assert r.status_code == 413, r.text
        assert "agent_instance_by_id" in r.json()["detail"]
        assert str(MAX_TRACE_AGENTS) in r.json()["detail"]
