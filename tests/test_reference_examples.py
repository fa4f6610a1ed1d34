"""Each file in examples/ (the reference's examples) runs as a user runs it: a separate Python
process, configured only through environment variables, against the local server over loopback
(and, for the Responses API examples, the OpenAI stand-in)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.examples import EXAMPLES, SCORE, run_example
from tests.support.openai_standin import OpenAIStandIn, reference_response
from tests.support.servers import ServerProcess


def reward_bodies(server: ServerProcess) -> list[dict[str, Any]]:
    return [r["body"] for r in server.requests() if "/evals/reward" in r["path"]]


@pytest.fixture
def composo_vars(live: ServerProcess) -> dict[str, str]:
    return {"COMPOSO_API_KEY": live.api_key, "COMPOSO_BASE_URL": live.base_url}


@pytest.fixture
def openai_vars(composo_vars: dict[str, str], openai_standin: OpenAIStandIn) -> dict[str, str]:
    """The stand-in answers as gpt-4.1 would for the reference's tools (web search + code
    interpreter, or the CoinGecko MCP server)."""
    openai_standin.on_response(reference_response)
    return {**composo_vars, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": openai_standin.base_url}


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A local server started without --api-key: on loopback it accepts any key, as a user's
    development server does. The constructor example hard-codes the reference's placeholder keys,
    which no keyed server accepts."""
    db = tmp_path_factory.mktemp("open-server") / "composo.db"
    with ServerProcess(api_keys=(), db=db) as srv:
        yield srv


def test_basic_evaluation(composo_vars: dict[str, str], live: ServerProcess) -> None:
    lines = run_example("basic_evaluation.py", composo_vars)
    assert re.fullmatch(f"Score: {SCORE}", lines[0]), lines
    assert lines[1].startswith("Explanation: ") and len(lines[1]) > len("Explanation: ")
    (body,) = reward_bodies(live)
    assert body["tags"] == {"environment": "production", "version": "1.0.0"}
    assert body["evaluation_criteria"] == "Reward accurate and informative responses"
    assert body["messages"][1] == {
        "role": "assistant",
        "content": "The capital of France is Paris.",
    }


def test_multiple_criteria(composo_vars: dict[str, str], live: ServerProcess) -> None:
    lines = run_example("multiple_criteria.py", composo_vars)
    assert len(lines) == 3, lines
    for line in lines:
        assert re.match(f"Score: {SCORE} - .+", line), line
    criteria = sorted(b["evaluation_criteria"] for b in reward_bodies(live))
    assert criteria == [
        "Penalize overly technical jargon",
        "Reward accurate information",
        "Reward clear communication",
    ]


def test_tool_call_evaluation(composo_vars: dict[str, str], live: ServerProcess) -> None:
    lines = run_example("tool_call_evaluation.py", composo_vars)
    assert re.fullmatch(f"Score: {SCORE}", lines[0]), lines
    (body,) = reward_bodies(live)
    assert body["tools"][0]["function"]["name"] == "get_weather"
    assert body["messages"][1]["tool_calls"][0]["function"]["arguments"] == (
        '{"location": "San Francisco"}'
    )
    assert body["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_123",
        "content": '{"temp": 65, "condition": "sunny"}',
    }


def test_non_blocking(composo_vars: dict[str, str], live: ServerProcess) -> None:
    lines = run_example("non_blocking.py", composo_vars)
    match = re.fullmatch(r"Task submitted with ID: (\S+)", lines[0])
    assert match, lines
    assert re.fullmatch(f"Score: {SCORE}", lines[1]), lines  # the example waits for the result
    assert lines[2].startswith("Explanation: ") and len(lines[2]) > len("Explanation: ")
    paths = [r["path"] for r in live.requests() if "/evals/" in r["path"]]
    assert paths[0] == "/api/v1/evals/reward/background"
    assert f"/api/v1/evals/tasks/{match.group(1)}" in paths[1:]


def test_context_manager(composo_vars: dict[str, str], live: ServerProcess) -> None:
    lines = run_example("context_manager.py", composo_vars)
    assert re.fullmatch(SCORE, lines[0]), lines
    assert len(reward_bodies(live)) == 1


def test_constructor_with_the_placeholder_keys(open_server: ServerProcess) -> None:
    open_server.reset()
    lines = run_example("constructor.py", {"COMPOSO_BASE_URL": open_server.base_url})
    assert re.fullmatch(f"Score: {SCORE}", lines[0]), lines
    (request,) = [r for r in open_server.requests() if "/evals/reward" in r["path"]]
    assert request["body"]["messages"][0]["content"] == "Is water wet?"


def test_constructor_placeholder_key_is_refused_by_a_keyed_server(live: ServerProcess) -> None:
    """Why the example above needs a server without keys: the placeholder is not a key."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "constructor.py")],
        env={**os.environ, "COMPOSO_BASE_URL": live.base_url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "AuthenticationError" in done.stderr
    assert "your_api_key" not in done.stderr  # the key is never echoed


def test_responses_builtin_tools(
    openai_vars: dict[str, str], openai_standin: OpenAIStandIn, live: ServerProcess
) -> None:
    lines = run_example("responses_builtin_tools.py", openai_vars)
    assert re.fullmatch(f"Score: {SCORE}", lines[0]), lines
    assert lines[1].startswith("Explanation: ")
    (asked,) = openai_standin.requests
    assert asked["path"] == "/v1/responses"
    assert [t["type"] for t in asked["body"]["tools"]] == ["web_search", "code_interpreter"]
    (body,) = reward_bodies(live)
    messages = body["messages"]
    assert messages[0] == {"role": "user", "content": asked["body"]["input"]}
    names = [c["function"]["name"] for m in messages for c in m.get("tool_calls") or ()]
    assert names == ["web_search", "code_interpreter"]
    sent = json.dumps(messages)
    assert "latest SpaceX news launch" in sent and "plt.plot(dates" in sent
    assert messages[-1]["content"].startswith("The latest SpaceX story")


def test_responses_mcp(
    openai_vars: dict[str, str], openai_standin: OpenAIStandIn, live: ServerProcess
) -> None:
    lines = run_example("responses_mcp.py", openai_vars)
    assert re.fullmatch(f"Score: {SCORE}", lines[0]), lines
    (asked,) = openai_standin.requests
    assert asked["body"]["tools"][0]["server_label"] == "coingecko"
    (body,) = reward_bodies(live)
    names = [c["function"]["name"] for m in body["messages"] for c in m.get("tool_calls") or ()]
    assert names == ["mcp_list_tools", "get_simple_price"]
    tool_text = " ".join(m["content"] for m in body["messages"] if m["role"] == "tool")
    assert "coingecko" in tool_text and "67321.12" in tool_text
    assert "$3,512.45" in body["messages"][-1]["content"]
