"""LangChain objects passed straight to Composo: the installed plugin converts them, and the wire
body is what the platform expects (real langchain-core objects, local server)."""

from __future__ import annotations

import copy
import functools
import json
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest

from composo import AsyncComposo, Composo, ComposoValidationError, EvaluationResponse
from tests.support.servers import ServerProcess

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

CRITERION = "Reward answers that use the tool result"


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny in {city}"


@functools.cache
def weather_tool() -> BaseTool:
    from langchain_core.tools import tool

    return tool(get_weather)


def last_body(live: ServerProcess) -> dict:  # type: ignore[type-arg]
    body: dict = live.requests()[-1]["body"]  # type: ignore[type-arg]
    return body


def test_installed_plugin_converts_messages_without_importing_it(live: ServerProcess) -> None:
    code = textwrap.dedent(
        f"""
        import json, sys
        from composo import Composo
        client = Composo(api_key={live.api_key!r}, base_url={live.base_url!r})
        client.evaluate(messages=[{{"role": "user", "content": "hi"}},
                                  {{"role": "assistant", "content": "hello"}}],
                        criteria="Reward friendly answers")
        dicts_loaded_langchain = "langchain_core" in sys.modules
        from langchain_core.messages import AIMessage, HumanMessage
        r = client.evaluate(messages=[HumanMessage("What is 2 + 2?"), AIMessage("4")],
                            criteria="Reward correct answers")
        print(json.dumps({{"score": r.score, "dicts_loaded_langchain": dicts_loaded_langchain,
                          "plugin_imported": "langchain_composo" in sys.modules}}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert 0.0 <= result["score"] <= 1.0
    # Plain dicts never pay for LangChain; the plugin was found through its entry point.
    assert result["dicts_loaded_langchain"] is False
    assert result["plugin_imported"] is True
    assert last_body(live)["messages"] == [
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4"},
    ]


def test_full_conversation_with_tool_calls_and_content_blocks(
    client: Composo, live: ServerProcess
) -> None:
    from langchain_core.messages import (
        AIMessage,
        ChatMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )

    messages = [
        SystemMessage("You are a weather bot."),
        HumanMessage(
            [
                {"type": "text", "text": "Weather in Oslo?"},
                {"type": "text", "text": "Be brief."},
            ]
        ),
        AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "t1"}]),
        ToolMessage("Sunny in Oslo", tool_call_id="t1", name="get_weather"),
        ChatMessage(role="developer", content="Answer in one sentence."),
    ]
    before = copy.deepcopy(messages)
    result = client.evaluate(
        messages=messages,
        result=AIMessage([{"type": "text", "text": "It is sunny in Oslo."}]),
        tools=[weather_tool()],
        criteria=CRITERION,
    )
    assert isinstance(result, EvaluationResponse) and result.score is not None
    assert messages == before  # the caller's messages are untouched
    body = last_body(live)
    assert body["messages"] == [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Oslo?\nBe brief."},  # separate parts
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "type": "function",
                    "id": "t1",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "name": "get_weather", "content": "Sunny in Oslo"},
        {"role": "system", "content": "Answer in one sentence."},
        {"role": "assistant", "content": "It is sunny in Oslo."},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]


def test_image_parts_are_kept_and_provider_only_parts_dropped(
    client: Composo, live: ServerProcess
) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    image = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    client.evaluate(
        messages=[HumanMessage([{"type": "text", "text": "What animal?"}, image])],
        result=AIMessage(
            [{"type": "reasoning", "reasoning": "whiskers"}, {"type": "text", "text": "A cat."}]
        ),
        criteria=CRITERION,
    )
    messages = last_body(live)["messages"]
    assert messages[0]["content"] == [{"type": "text", "text": "What animal?"}, image]
    assert messages[1] == {"role": "assistant", "content": "A cat."}


INVALID_CALL = {
    "name": "get_weather",
    "args": '{"city": Oslo}',
    "id": "bad1",
    "error": "Expecting value: line 1 column 10 (char 9)",
    "type": "invalid_tool_call",
}
INVALID_CALL_TEXT = (
    'Invalid tool call get_weather with arguments {"city": Oslo} '
    "(error: Expecting value: line 1 column 10 (char 9))"
)


def test_tool_calls_with_unparseable_arguments_are_shown_to_the_judge(
    client: Composo, live: ServerProcess
) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    answer = AIMessage("", invalid_tool_calls=[INVALID_CALL])  # type: ignore[list-item]
    before = copy.deepcopy(answer)
    client.evaluate(
        messages=[HumanMessage("Weather in Oslo?")],
        result=answer,
        tools=[weather_tool()],
        criteria="Fails if the agent calls a tool with invented arguments",
    )
    assert answer == before
    # As text, not as a tool call no tool message answers.
    assert last_body(live)["messages"][-1] == {"role": "assistant", "content": INVALID_CALL_TEXT}

    client.evaluate(
        messages=[HumanMessage("Weather in Oslo?")],
        result=AIMessage(
            [{"type": "text", "text": "Checking."}],
            tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "ok1"}],
            invalid_tool_calls=[INVALID_CALL],  # type: ignore[list-item]
        ),
        criteria=CRITERION,
    )
    assistant = last_body(live)["messages"][-1]
    assert assistant["content"] == f"Checking.\n{INVALID_CALL_TEXT}"
    assert [c["id"] for c in assistant["tool_calls"]] == ["ok1"]


def test_cited_answer_blocks_are_joined_like_langchain_text(
    client: Composo, live: ServerProcess
) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    citation = {"type": "char_location", "cited_text": "Oslo is sunny.", "document_index": 0}
    answer = AIMessage(
        [
            {"type": "text", "text": "According to the forecast, "},
            {"type": "text", "text": "it is sunny in Oslo", "citations": [citation]},
            {"type": "text", "text": "."},
        ]
    )
    client.evaluate(messages=[HumanMessage("Weather in Oslo?")], result=answer, criteria=CRITERION)
    assert last_body(live)["messages"][-1] == {"role": "assistant", "content": answer.text}
    assert answer.text == "According to the forecast, it is sunny in Oslo."


def test_reasoning_only_turn_sends_its_summary_not_an_empty_list(
    client: Composo, live: ServerProcess
) -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    summary = [
        {"type": "summary_text", "text": "The user wants the weather."},
        {"type": "summary_text", "text": "I should call get_weather."},
    ]
    thinking = AIMessage(
        [{"type": "reasoning", "id": "rs_1", "summary": summary}],
        tool_calls=[{"name": "get_weather", "args": {"city": "Oslo"}, "id": "t1"}],
    )
    client.evaluate(
        messages=[
            HumanMessage("Weather in Oslo?"),
            thinking,
            ToolMessage("Sunny in Oslo", tool_call_id="t1"),
            AIMessage([{"type": "thinking", "thinking": "hm", "signature": "x"}]),
        ],
        criteria=CRITERION,
    )
    messages = last_body(live)["messages"]
    assert messages[1]["content"] == "The user wants the weather.\n\nI should call get_weather."
    assert messages[1]["tool_calls"][0]["id"] == "t1"
    assert messages[3] == {"role": "assistant", "content": ""}


@pytest.mark.parametrize("kind", ["AIMessage", "ChatResult", "LLMResult-chat", "LLMResult-text"])
def test_results_and_prompt_values(client: Composo, live: ServerProcess, kind: str) -> None:
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult, Generation, LLMResult
    from langchain_core.prompts import ChatPromptTemplate

    result = {
        "AIMessage": AIMessage("Bonjour!"),
        "ChatResult": ChatResult(generations=[ChatGeneration(message=AIMessage("Bonjour!"))]),
        "LLMResult-chat": LLMResult(generations=[[ChatGeneration(message=AIMessage("Bonjour!"))]]),
        "LLMResult-text": LLMResult(generations=[[Generation(text="Bonjour!")]]),
    }[kind]
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Translate to {language}."), ("human", "{text}")]
    ).invoke({"language": "French", "text": "Hello!"})
    client.evaluate(messages=prompt, result=result, criteria="Reward correct translations")
    assert last_body(live)["messages"] == [
        {"role": "system", "content": "Translate to French."},
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "Bonjour!"},
    ]


async def test_async_client_takes_langchain_objects(
    aclient: AsyncComposo, live: ServerProcess
) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    [a, b] = await aclient.evaluate(
        messages=[HumanMessage("2 + 2?")],
        result=AIMessage("4"),
        criteria=["Reward correct answers", "Passes if the answer is a number"],
    )
    assert a.criterion == "Reward correct answers" and b.score in (0.0, 1.0)


def test_mistakes_are_explained_before_any_request(client: Composo, live: ServerProcess) -> None:
    from langchain_core.messages import AIMessage, ChatMessage, HumanMessage
    from langchain_core.outputs import LLMResult

    with pytest.raises(ComposoValidationError, match="at least 2"):
        client.evaluate(messages=[HumanMessage("alone")], criteria=CRITERION)
    with pytest.raises(ComposoValidationError, match=r"roles? .*critic|critic"):
        client.evaluate(
            messages=[ChatMessage(role="critic", content="hm"), HumanMessage("hi")],
            result=AIMessage("hello"),
            criteria=CRITERION,
        )
    with pytest.raises(ComposoValidationError, match="LangChain AIMessage"):
        client.evaluate(messages=[HumanMessage("hi")], result=object(), criteria=CRITERION)
    with pytest.raises(ComposoValidationError, match="no generations"):
        client.evaluate(
            messages=[HumanMessage("hi")], result=LLMResult(generations=[]), criteria=CRITERION
        )
    assert live.requests() == []


def test_bind_tools_style_tools(client: Composo, live: ServerProcess) -> None:
    from langchain_core.messages import AIMessage, HumanMessage
    from pydantic import BaseModel, Field

    from tests.support.langchain_models import ToolCallingFakeChat

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    class Multiply(BaseModel):
        """Multiply two integers."""

        a: int = Field(description="first factor")
        b: int

    tools = [weather_tool(), add, Multiply]
    conversation = {"messages": [HumanMessage("3 * 4?")], "result": AIMessage("12")}
    client.evaluate(**conversation, tools=tools, criteria=CRITERION)
    names = [t["function"]["name"] for t in last_body(live)["tools"]]
    assert names == ["get_weather", "add", "Multiply"]
    assert last_body(live)["tools"][2]["function"]["parameters"]["properties"]["a"] == {
        "description": "first factor",
        "type": "integer",
    }

    bound = ToolCallingFakeChat(messages=iter([])).bind_tools([add])
    client.evaluate(**conversation, tools=bound, criteria=CRITERION)
    assert [t["function"]["name"] for t in last_body(live)["tools"]] == ["add"]
