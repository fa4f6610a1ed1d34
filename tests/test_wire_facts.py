"""The platform's contract as the client and the local server both apply it (one definition)."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import httpx
import pytest

from composo import AsyncComposo, Composo, ComposoValidationError
from composo.types import RewardRequest, TraceRequest
from tests.support.servers import HTTP, ServerProcess, free_port

QA = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]
REWARD = "Reward accurate answers"


def post(live: ServerProcess, path: str, body: object) -> httpx.Response:
    return HTTP.post(live.base_url + path, json=body, headers={"API-Key": live.api_key}, timeout=10)


def tool_trace() -> dict[str, Any]:
    """A trace with free-text message types and extra fields on tool calls, responses, specs."""
    call = {"id": "c1", "name": "lookup", "parameters": '{"q": "x"}', "index": 0}
    return {
        "root_agent_instance_id": "a",
        "agent_instance_by_id": {
            "a": {
                "id": "a",
                "name": "agent",
                "interactions": [
                    {
                        "input_messages": [
                            {"role": "user", "type": "text", "content": "Look x up"},
                            {
                                "role": "tool",
                                "type": "tool_response",
                                "content": {"id": "c0", "response": "ok", "status": "done"},
                            },
                        ],
                        "output_messages": [
                            {"type": "thinking_tokens", "content": "I should look it up"},
                            {"type": "tool_call", "content": call},
                        ],
                        "tools_available": [
                            {"name": "lookup", "parameters": "{}", "strict": True},
                        ],
                    }
                ],
            }
        },
    }


@pytest.fixture(scope="module")
def offline() -> Composo:
    return Composo(api_key="k", base_url=f"http://127.0.0.1:{free_port()}")


def test_a_developer_message_is_accepted(live: ServerProcess, client: Composo) -> None:
    developer = {"role": "developer", "content": "Answer in one word."}
    body = {"messages": [developer, *QA], "evaluation_criteria": REWARD}
    assert RewardRequest.model_validate(body).wire()["messages"][0] == developer
    assert post(live, "/api/v1/evals/reward", body).status_code == 200
    # The chat adapters send OpenAI's developer turn as the system turn it stands for.
    assert client.evaluate(messages=[developer, *QA], criteria=REWARD).score is not None


@pytest.mark.parametrize(
    "criterion",
    ["rewards concise answers", "Rewards responses that cite the source", "penalizes rambling"],
)
def test_criteria_are_a_plain_prefix_after_the_first_letter(
    live: ServerProcess, client: Composo, criterion: str
) -> None:
    assert client.evaluate(messages=QA, criteria=criterion).criterion == criterion
    assert post(live, "/api/v1/evals/reward", {"messages": QA, "evaluation_criteria": criterion})
    r = post(live, "/api/v1/evals/reward", {"messages": QA, "evaluation_criteria": "Be nice"})
    assert r.status_code == 422 and "must begin with" in r.text


def test_trace_types_are_free_text_and_tool_objects_keep_extra_fields(
    live: ServerProcess, client: Composo
) -> None:
    trace = tool_trace()
    before = copy.deepcopy(trace)
    res = client.evaluate_trace(trace, criteria="Reward agents that use tools well")
    assert res.overall_score is not None
    assert trace == before  # the caller's trace is not touched
    (seen,) = live.requests()
    step = seen["body"]["trace"]["agent_instance_by_id"]["a"]["interactions"][0]
    assert step["output_messages"][0]["type"] == "thinking_tokens"
    assert step["output_messages"][1]["content"]["index"] == 0
    assert step["input_messages"][1]["content"]["status"] == "done"
    assert step["tools_available"][0]["strict"] is True


def test_other_trace_objects_still_refuse_unknown_fields(
    live: ServerProcess, offline: Composo
) -> None:
    trace = tool_trace()
    trace["agent_instance_by_id"]["a"]["colour"] = "blue"
    with pytest.raises(ComposoValidationError, match="colour"):
        offline.evaluate_trace(trace, criteria=REWARD)
    r = post(live, "/api/v1/evals/trace", {"trace": trace, "evaluation_criteria": REWARD})
    assert r.status_code == 422 and "colour" in r.text


def test_system_message_is_read_as_system(live: ServerProcess) -> None:
    assert (
        RewardRequest(messages=QA, evaluation_criteria=REWARD, system_message="Be brief.").wire()[
            "system"
        ]
        == "Be brief."
    )
    body = {"messages": QA, "evaluation_criteria": REWARD, "system_message": "Be brief."}
    assert post(live, "/api/v1/evals/reward", body).status_code == 200


def test_trace_requests_take_a_trace_id(live: ServerProcess) -> None:
    trace_id = str(uuid.uuid4())
    body = {"trace": tool_trace(), "evaluation_criteria": REWARD, "trace_id": trace_id}
    assert post(live, "/api/v1/evals/trace", body).status_code == 200
    assert TraceRequest.model_validate(body).wire()["trace_id"] == trace_id
    r = post(live, "/api/v1/evals/trace", {**body, "trace_id": "not-a-uuid"})
    assert r.status_code == 422 and "trace_id" in r.text


def test_explanation_cleaning_is_refused_for_traces_by_client_and_server(
    live: ServerProcess, offline: Composo
) -> None:
    # `offline` has nothing listening: the refusal comes before any network call.
    with pytest.raises(ComposoValidationError, match=r"^explanation_cleaning: .*trace"):
        offline.evaluate_trace(tool_trace(), criteria=REWARD, explanation_cleaning="end_user")
    body = {
        "trace": tool_trace(),
        "evaluation_criteria": REWARD,
        "explanation_cleaning": "end_user",
    }
    r = post(live, "/api/v1/evals/trace", body)
    assert r.status_code == 422 and "explanation_cleaning" in r.text


async def test_the_async_client_refuses_it_too() -> None:
    async with AsyncComposo(api_key="k", base_url=f"http://127.0.0.1:{free_port()}") as c:
        with pytest.raises(ComposoValidationError, match="explanation_cleaning"):
            await c.evaluate_trace(tool_trace(), criteria=REWARD, explanation_cleaning="end_user")


def test_tag_rules_are_the_same_on_the_server(live: ServerProcess) -> None:
    body = {"messages": QA, "evaluation_criteria": REWARD, "tags": {"k": "v" * 65}}
    r = post(live, "/api/v1/evals/reward", body)
    assert r.status_code == 422 and "at most 64 characters" in r.text
    r = post(live, "/api/v1/evals/reward", {**body, "model_core": "gpt-5"})
    assert r.status_code == 422 and "is not a model core" in r.text
