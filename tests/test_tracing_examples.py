"""The tracing examples run as a user runs them: a separate process configured only through
environment variables, with OpenAI answered by the loopback stand-in and Composo by the local
server."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.support.examples import SCORE, run_example
from tests.support.openai_standin import OpenAIStandIn, chat_completion, tool_call
from tests.support.servers import ServerProcess


@pytest.fixture
def env(live: ServerProcess, openai_standin: OpenAIStandIn) -> dict[str, str]:
    return {
        "COMPOSO_API_KEY": live.api_key,
        "COMPOSO_BASE_URL": live.base_url,
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": openai_standin.base_url,
    }


def sent_traces(server: ServerProcess) -> list[dict[str, Any]]:
    return [r["body"] for r in server.requests() if r["path"].endswith("/evals/trace")]


def test_reference_evaluate_trace_example(
    env: dict[str, str], live: ServerProcess, openai_standin: OpenAIStandIn
) -> None:
    openai_standin.queue_chat(
        chat_completion(content="Quantum computing uses qubits, superposition and entanglement.")
    )
    lines = run_example("evaluate_trace.py", env)
    assert re.fullmatch(f"Overall Score: {SCORE}", lines[0]), lines
    assert lines[1].startswith("Explanation: ")
    (body,) = sent_traces(live)
    assert body["evaluation_criteria"] == "Reward thorough research and accurate information"
    assert body["tags"] == {"environment": "production", "agent_version": "1.0.0"}
    trace = body["trace"]
    (agent,) = trace["agent_instance_by_id"].values()
    assert agent["name"] == "research_agent"
    assert agent["interactions"] == [
        {
            "input_messages": [
                {"role": "user", "type": "text", "content": "Research: quantum computing"}
            ],
            "output_messages": [
                {
                    "type": "text",
                    "content": "Quantum computing uses qubits, superposition and entanglement.",
                }
            ],
        }
    ]


def planet_model(body: dict[str, Any]) -> dict[str, Any]:
    """Answers as a model would for the two-agent example."""
    messages = body["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        return chat_completion(content=f"Research says: {last['content']}")
    if body.get("tools"):
        return chat_completion(tool_calls=[tool_call("lookup_fact", {"topic": "mars"})])
    if "research question" in messages[0]["content"]:
        return chat_completion(content="How many moons does Mars have?")
    return chat_completion(content="Mars has two moons: Phobos and Deimos.")


def test_two_agent_example(
    env: dict[str, str], live: ServerProcess, openai_standin: OpenAIStandIn
) -> None:
    openai_standin.on_chat(planet_model)
    lines = run_example("trace_agents.py", env)
    assert lines[0] == "Answer: Mars has two moons: Phobos and Deimos."
    assert re.fullmatch(f"Overall Score: {SCORE}", lines[1]), lines
    assert sorted(line.split(":")[0] for line in lines[2:]) == ["orchestrator", "researcher"]
    (body,) = sent_traces(live)
    agents = body["trace"]["agent_instance_by_id"]
    root = agents[body["trace"]["root_agent_instance_id"]]
    assert root["name"] == "orchestrator"
    plan, sub, write = root["interactions"]
    assert agents[sub]["name"] == "researcher"
    assert plan["output_messages"][0]["content"] == "How many moons does Mars have?"
    assert "Phobos and Deimos" in write["input_messages"][-1]["content"]
    called, answered = agents[sub]["interactions"]
    assert called["tools_available"][0]["name"] == "lookup_fact"
    assert called["output_messages"][0]["type"] == "tool_call"
    call_id = called["output_messages"][0]["content"]["id"]
    assert answered["input_messages"][-1] == {
        "role": "tool",
        "type": "tool_response",
        "content": {
            "id": call_id,
            "response": "Mars has two small moons, Phobos and Deimos.",
            "name": "lookup_fact",
        },
    }
