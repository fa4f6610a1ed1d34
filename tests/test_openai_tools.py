"""Tool definitions from the openai package: typed Responses tools, their dumped (flat) dicts and
a ``Response``'s own ``tools`` reach the server in the OpenAI tool shape; what is not a tool is
refused before any request, naming the element and the fix (real openai models, local server)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from composo import Composo, ComposoValidationError
from tests.support import openai_standin as oas
from tests.support.lazy import lazy_import
from tests.support.openai_standin import OpenAIStandIn
from tests.support.servers import ServerProcess

openai = lazy_import("openai")

CRITERION = "Reward choosing the right tool for the question"
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ],
}
WEATHER_PARAMS = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


@pytest.fixture
def oai(openai_standin: OpenAIStandIn) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=openai_standin.base_url, api_key="sk-test", max_retries=0) as c:
        yield c


def typed_tools() -> list[Any]:
    from openai.types.responses import CustomTool, FileSearchTool, FunctionTool, WebSearchTool
    from openai.types.responses.tool import CodeInterpreter, Mcp

    return [
        FunctionTool(
            type="function",
            name="get_weather",
            description="Current weather for a city",
            parameters=WEATHER_PARAMS,
            strict=True,
        ),
        WebSearchTool(type="web_search"),
        FileSearchTool(type="file_search", vector_store_ids=["vs_docs"]),
        CodeInterpreter(type="code_interpreter", container={"type": "auto"}),
        Mcp(
            type="mcp",
            server_label="dice",
            server_url="https://dice.example/mcp",
            allowed_tools=["roll"],
        ),
        CustomTool(type="custom", name="grep", description="Search the code base"),
    ]


def sent_tools(live: ServerProcess) -> list[dict[str, Any]]:
    bodies = [r["body"] for r in live.requests() if r["path"].endswith("/evals/reward")]
    assert len(bodies) == 1, bodies
    tools: list[dict[str, Any]] = bodies[0].get("tools") or []
    return tools


def by_name(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    assert all(t["type"] == "function" and set(t) == {"type", "function"} for t in tools), tools
    return {t["function"]["name"]: t["function"] for t in tools}


def test_typed_responses_tools_are_sent_as_openai_tools(
    client: Composo, live: ServerProcess
) -> None:
    tools = typed_tools()
    before = [t.model_dump() for t in tools]
    result = client.evaluate(messages=QUESTION, result=CALL, tools=tools, criteria=CRITERION)
    assert result.score is not None, result.explanation
    sent = by_name(sent_tools(live))
    assert list(sent) == [
        "get_weather",
        "web_search",
        "file_search",
        "code_interpreter",
        "roll",
        "grep",
    ]
    assert sent["get_weather"] == {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": WEATHER_PARAMS,
        "strict": True,
    }
    assert "searches the web" in sent["web_search"]["description"]
    assert "vs_docs" in sent["file_search"]["description"]
    assert "MCP server 'dice' (https://dice.example/mcp)" in sent["roll"]["description"]
    assert sent["grep"]["parameters"]["properties"] == {"input": {"type": "string"}}
    assert [t.model_dump() for t in tools] == before  # the caller's objects are untouched


def test_dumped_responses_tools_are_converted_not_passed_through(
    client: Composo, live: ServerProcess
) -> None:
    dumped = [t.model_dump(mode="json", exclude_none=True) for t in typed_tools()]
    assert dumped[0]["name"] == "get_weather" and "function" not in dumped[0]  # the flat shape
    kept = copy.deepcopy(dumped)
    client.evaluate(messages=QUESTION, result=CALL, tools=dumped, criteria=CRITERION)
    from_dicts = sent_tools(live)
    live.reset()
    client.evaluate(messages=QUESTION, result=CALL, tools=typed_tools(), criteria=CRITERION)
    assert from_dicts == sent_tools(live)
    assert by_name(from_dicts)["get_weather"]["parameters"] == WEATHER_PARAMS
    assert dumped == kept


def test_chat_completions_tools_are_sent_as_given(client: Composo, live: ServerProcess) -> None:
    nested = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": WEATHER_PARAMS},
    }
    from openai.types.chat import ChatCompletionFunctionTool

    typed = ChatCompletionFunctionTool.model_validate(nested)
    client.evaluate(messages=QUESTION, result=CALL, tools=[typed], criteria=CRITERION)
    assert sent_tools(live) == [nested]
    live.reset()
    client.evaluate(messages=QUESTION, result=CALL, tools=[nested], criteria=CRITERION)
    assert sent_tools(live) == [nested]


def test_response_result_brings_its_own_tools(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI, client: Composo, live: ServerProcess
) -> None:
    openai_standin.on_response(oas.reference_response)
    offered: Any = [
        {"type": "web_search"},
        {"type": "function", "name": "get_weather", "parameters": WEATHER_PARAMS},
    ]
    resp = oai.responses.create(model="gpt-4.1", input="SpaceX launches?", tools=offered)
    assert [t.type for t in resp.tools] == ["web_search", "function"]

    client.evaluate(input="SpaceX launches?", result=resp, criteria=CRITERION)
    assert list(by_name(sent_tools(live))) == ["web_search", "get_weather"]

    live.reset()  # the same from the response's dict
    client.evaluate(input="SpaceX launches?", result=resp.model_dump(), criteria=CRITERION)
    assert list(by_name(sent_tools(live))) == ["web_search", "get_weather"]

    live.reset()  # tools= given wins
    only = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
    client.evaluate(input="SpaceX launches?", result=resp, tools=only, criteria=CRITERION)
    assert sent_tools(live) == only


def test_a_response_passed_as_tools_is_refused_with_the_fix(
    openai_standin: OpenAIStandIn, oai: openai.OpenAI, client: Composo, live: ServerProcess
) -> None:
    openai_standin.on_response(oas.reference_response)
    resp = oai.responses.create(model="gpt-4.1", input="hi", tools=[{"type": "web_search"}])
    live.reset()
    with pytest.raises(ComposoValidationError) as info:
        client.evaluate(messages=QUESTION, result=CALL, tools=[resp], criteria=CRITERION)
    message = str(info.value)
    assert "tools[0]" in message
    assert "openai.types.responses.response.Response" in message
    assert "pass response.tools" in message
    item = resp.output[0]  # an output item (a web search call) is not a tool either
    with pytest.raises(ComposoValidationError, match=rf"tools\[1\] is a .*{type(item).__name__}"):
        client.evaluate(
            messages=QUESTION, result=CALL, tools=[typed_tools()[0], item], criteria=CRITERION
        )
    assert live.requests() == []
